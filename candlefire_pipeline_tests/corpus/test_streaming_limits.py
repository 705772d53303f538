"""Limits enforced while a drop streams: record bytes, XML text length, drop bytes."""

from __future__ import annotations

import gzip

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus import drops, xml_stream
from candlefire_pipeline.corpus.drops import DropFileError, write_chunks, write_papers
from candlefire_pipeline.settings import IngestLimits, Settings
from candlefire_pipeline_tests.corpus.bad_inputs import article, line, rec, xml_set

SMALL = IngestLimits(max_record_bytes=4_000, max_element_chars=1_000, max_drop_bytes=1_000_000)


def run(tmp_path, name: str, data: bytes, limits: IngestLimits = SMALL):
    drop = tmp_path / name
    drop.write_bytes(data)
    out = tmp_path / "out"
    summary = write_papers(drop, out, limits)
    papers = pq.read_table(out / "papers.parquet")["pmid"].to_pylist()
    rejects = pq.read_table(out / "rejects.parquet").to_pylist()
    return summary, papers, rejects


def big_title(pmid: str, chars: int) -> str:
    return article(pmid).replace("SOD1 in <i>ALS</i>", "T" * chars)


# (case, record xml, reason) -- one oversized record between two good ones
XML_OVERSIZED = [
    ("title over the element limit", big_title("2", 1_001),
     "too_large: <ArticleTitle> text exceeds 1000 characters"),
    ("tail text over the element limit", article("2", extra="x" * 1_001),
     "too_large: <PubmedArticle> text exceeds 1000 characters"),
    ("record over the byte limit (many small authors)",
     article("2").replace("<Abstract>", "<AuthorList>" + "<Author><LastName>L</LastName></Author>"
                          * 120 + "</AuthorList><Abstract>"),
     "too_large: record exceeds 4000 bytes"),
    ("attribute-heavy record over the byte limit",
     article("2").replace("<Article>", "<Article a='" + "v" * 3_000 + "' b='" + "w" * 1_500 + "'>"),
     "too_large: record exceeds 4000 bytes"),
    ("one empty-element record of 20 KB", "<PubmedArticle x='" + "a" * 20_000 + "'/>",
     "too_large: record exceeds 4000 bytes"),
]  # fmt: skip


@pytest.mark.parametrize("case, record, reason", XML_OVERSIZED, ids=[c[0] for c in XML_OVERSIZED])
@pytest.mark.parametrize("suffix", [".xml", ".xml.gz"])
def test_oversized_xml_record_is_rejected_and_its_neighbours_kept(
    tmp_path, case, record, reason, suffix
):
    data = xml_set(article("1"), record, article("3"))
    data = gzip.compress(data) if suffix.endswith(".gz") else data
    summary, papers, rejects = run(tmp_path, f"b{suffix}", data)
    assert papers == ["1", "3"]
    pmid = None if "x='" in record else "2"
    assert [(r["record_no"], r["pmid"], r["reason"]) for r in rejects] == [(2, pmid, reason)]
    assert rejects[0]["excerpt"].startswith("<PubmedArticle><PMID>")
    assert summary.accepted + summary.rejected == summary.records_in == 3


def test_oversized_record_without_pmid_is_rejected_with_a_null_pmid(tmp_path):
    _, papers, rejects = run(tmp_path, "b.xml", xml_set(big_title("", 2_000), article("3")))
    assert papers == ["3"] and rejects[0]["pmid"] is None
    assert rejects[0]["reason"].startswith("too_large")


def test_record_element_count_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(xml_stream, "MAX_RECORD_ELEMENTS", 50)
    many = article("2").replace("<Abstract>", "<b/>" * 60 + "<Abstract>")
    _, papers, rejects = run(tmp_path, "b.xml", xml_set(article("1"), many), IngestLimits())
    assert papers == ["1"]
    assert rejects[0]["reason"] == "too_large: record has more than 50 elements"


def test_records_just_under_the_limits_are_accepted(tmp_path):
    record = big_title("2", 1_000)
    assert len(record) < SMALL.max_record_bytes
    _, papers, rejects = run(tmp_path, "b.xml", xml_set(article("1"), record))
    assert papers == ["1", "2"] and rejects == []


# (case, data, message fragment) -- the whole drop is refused, nothing is written. A token
# (tag, attribute, comment) is held whole by expat: one spanning more than the record limit in
# reads without any parser event refuses the drop (reads are 64 KiB, hence 300 KB here).
REFUSED = [
    ("huge attribute (one token)", "b.xml",
     xml_set(article("1"), "<PubmedArticle x='" + "a" * 300_000 + "'/>"), "no complete XML token"),
    ("huge comment", "b.xml", xml_set(article("1"), "<!--" + "c" * 300_000 + "-->"),
     "no complete XML token"),
    ("huge tag name", "b.xml", xml_set("<" + "P" * 300_000 + "/>"), "no complete XML token"),
    ("oversized DeleteCitation", "b.xml",
     xml_set("<DeleteCitation>" + "<PMID>1</PMID>" * 400 + "</DeleteCitation>"),
     "a <DeleteCitation> is too large (too_large: record exceeds 4000 bytes)"),
    ("XML over the drop limit", "b.xml", xml_set(*(article(str(n)) for n in range(1, 3000))),
     "exceeds the drop limit of 1000000 decompressed bytes"),
    ("gzip XML bomb", "b.xml.gz",
     gzip.compress(xml_set(article("1")).replace(b"</PubmedArticleSet>", b" " * 2_000_000
                                                 + b"</PubmedArticleSet>")),
     "exceeds the drop limit of 1000000 decompressed bytes"),
    ("JSONL over the drop limit", "b.jsonl", line(rec("1")) * 4_000,
     "exceeds the drop limit of 1000000 decompressed bytes"),
    ("gzip JSONL bomb of blank lines", "b.jsonl.gz", gzip.compress(b"\n" * 2_000_000),
     "exceeds the drop limit of 1000000 decompressed bytes"),
    ("gzip JSONL bomb, one endless line", "b.jsonl.gz",
     gzip.compress(line(rec("1")) + b"[" * 2_000_000), "exceeds the drop limit"),
]  # fmt: skip


@pytest.mark.parametrize("case, name, data, fragment", REFUSED, ids=[c[0] for c in REFUSED])
def test_drop_past_a_limit_is_refused_whole_and_nothing_is_written(tmp_path, case, name, data,
                                                                   fragment):  # fmt: skip
    drop = tmp_path / name
    drop.write_bytes(data)
    with pytest.raises(DropFileError) as caught:
        write_papers(drop, tmp_path / "out", SMALL)
    assert str(caught.value).startswith(str(drop)) and fragment in str(caught.value)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_jsonl_record_limit_comes_from_the_limits(tmp_path):
    data = line(rec("1")) + line(rec("2", abstract="a" * 5_000)) + line(rec("3"))
    _, papers, rejects = run(tmp_path, "b.jsonl", data)
    assert papers == ["1", "3"]
    assert rejects[0]["reason"] == "too_large: record exceeds 4000 bytes"
    other = tmp_path / "defaults"
    other.mkdir()
    _, papers, _ = run(other, "b.jsonl", data, IngestLimits())
    assert papers == ["1", "2", "3"]  # the default limit (5 MiB) takes it


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, IngestLimits(5 * 1024 * 1024, 1_000_000, 4 * 1024**3)),
        (
            {
                "CANDLEFIRE_MAX_RECORD_BYTES": "1000",
                "CANDLEFIRE_MAX_ELEMENT_CHARS": "10",
                "CANDLEFIRE_MAX_DROP_BYTES": "99",
            },
            IngestLimits(1000, 10, 99),
        ),
    ],
)
def test_limits_come_from_the_environment(monkeypatch, env, expected):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert Settings.from_env().ingest == expected


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_bad_limit_settings_are_clear_errors(monkeypatch, value):
    monkeypatch.setenv("CANDLEFIRE_MAX_DROP_BYTES", value)
    with pytest.raises(ValueError, match="CANDLEFIRE_MAX_DROP_BYTES must be"):
        Settings.from_env()


def test_written_rows_are_flushed_by_size_not_only_by_count(tmp_path, monkeypatch):
    # a batch of 1,000 records of 5 MB each must not sit in one buffer before a write
    monkeypatch.setattr(drops, "WRITE_BATCH_BYTES", 5_000)
    data = b"".join(line(rec(str(n), abstract="a" * 2_000)) for n in range(1, 11))
    drop = tmp_path / "b.jsonl"
    drop.write_bytes(data)
    summary = write_papers(drop, tmp_path / "out")
    assert summary.accepted == 10
    assert pq.ParquetFile(tmp_path / "out/papers.parquet").metadata.num_row_groups == 4
    assert write_chunks(tmp_path / "out").chunks == 10
    assert pq.ParquetFile(tmp_path / "out/chunks.parquet").metadata.num_row_groups == 4
    assert pq.read_table(tmp_path / "out/papers.parquet")["pmid"].to_pylist() == [
        str(n) for n in range(1, 11)
    ]
