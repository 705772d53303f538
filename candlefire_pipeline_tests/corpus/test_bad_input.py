"""Bad drop files: every record ends up accepted or rejected with a reason, or the file fails."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus import drops
from candlefire_pipeline.corpus.drops import DropFileError, write_chunks, write_papers
from candlefire_pipeline.corpus.records import Accepted, RecordStream
from candlefire_pipeline_tests.corpus.bad_inputs import (
    UNREADABLE,
    WRITABLE_ODDITIES,
    XML_RECORD_CASES,
    jsonl_cases,
    line,
    rec,
    unwritable_cases,
)

JSONL_CASES = jsonl_cases() + unwritable_cases()


def batch(tmp_path, name: str, data: bytes):
    drop = tmp_path / "drops" / name
    drop.parent.mkdir(exist_ok=True)
    drop.write_bytes(data)
    return drop, tmp_path / "batches" / name


def check_accounting(summary, out_dir, accepted, rejects, deleted=()):
    assert summary.accepted + summary.rejected == summary.records_in
    papers = pq.read_table(out_dir / "papers.parquet").column("pmid").to_pylist()
    reject_rows = pq.read_table(out_dir / "rejects.parquet").to_pylist()
    assert papers == accepted
    assert len(reject_rows) == len(rejects) == summary.rejected
    for row, (record_no, reason) in zip(reject_rows, rejects, strict=True):
        assert row["record_no"] == record_no
        assert row["reason"].startswith(reason)
        assert len(row["excerpt"]) <= 200
    gone = pq.read_table(out_dir / "deleted.parquet").column("pmid").to_pylist()
    assert gone == list(deleted) and summary.deleted == len(deleted)
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "deleted.parquet",
        "papers.parquet",
        "rejects.parquet",
    ]


@pytest.mark.parametrize("case", JSONL_CASES, ids=[c.kind for c in JSONL_CASES])
def test_bad_jsonl_records_are_rejected_with_a_reason(tmp_path, case):
    drop, out_dir = batch(tmp_path, case.name, case.data)
    summary = write_papers(drop, out_dir)
    check_accounting(summary, out_dir, case.accepted, case.rejects)
    assert summary.records_in == len(case.accepted) + len(case.rejects)
    chunks = write_chunks(out_dir)
    assert chunks.papers == len(case.accepted)


@pytest.mark.parametrize(
    "kind, data, accepted, rejects, deleted", XML_RECORD_CASES, ids=[c[0] for c in XML_RECORD_CASES]
)
def test_bad_xml_records_are_rejected_with_a_reason(tmp_path, kind, data, accepted, rejects,
                                                     deleted):  # fmt: skip
    drop, out_dir = batch(tmp_path, "b.xml", data)
    summary = write_papers(drop, out_dir)
    check_accounting(summary, out_dir, accepted, rejects, deleted)
    papers = pq.read_table(out_dir / "papers.parquet").to_pylist()
    assert all(p["year"] == 1998 and p["title"] == "SOD1 in ALS" for p in papers)
    assert all(p["abstract"] == "BACKGROUND: b\nplain" for p in papers)


@pytest.mark.parametrize("kind, name, data, fragment", UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_unreadable_files_fail_whole_and_leave_nothing(tmp_path, kind, name, data, fragment):
    drop, out_dir = batch(tmp_path, name, data)
    with pytest.raises(DropFileError) as caught:
        write_papers(drop, out_dir)
    assert name in str(caught.value) and fragment in str(caught.value)
    assert not out_dir.exists() or not list(out_dir.iterdir())


def test_missing_drop_file_is_a_drop_file_error(tmp_path):
    with pytest.raises(DropFileError, match="nowhere.jsonl"):
        write_papers(tmp_path / "nowhere.jsonl", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_failure_mid_write_leaves_no_files_and_keeps_the_previous_batch(tmp_path, monkeypatch):
    drop, out_dir = batch(tmp_path, "b.jsonl", b"")
    write_papers(drop, out_dir)
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}

    def broken_stream(path, limits=None):
        def outcomes():
            paper = rec("1") | {"record_no": 1, "paper_hash": "h", "title": "t", "abstract": "a"}
            yield Accepted(1, paper)
            raise DropFileError(f"{path}: disk vanished")

        return RecordStream(2, outcomes())

    monkeypatch.setattr(drops, "read_drop", broken_stream)
    with pytest.raises(DropFileError, match="disk vanished"):
        write_papers(drop, out_dir)
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before


def test_reasons_markdown_lists_kinds_with_counts_and_samples(tmp_path):
    data = b"".join(
        [b"{bad\n", b"[1]\n", b"{bad\n", b'{"pmid": "x|y", "title": "t"}\n']
        + [f'{{"pmid": "{i}", "year": {3000 + i}, "title": "t"}}\n'.encode() for i in range(3)]
    )
    drop, out_dir = batch(tmp_path, "b.jsonl", data)
    summary = write_papers(drop, out_dir)
    assert summary.reasons == {"invalid_json": 2, "not_an_object": 1, "bad_pmid": 1,
                               "out_of_range": 3}  # fmt: skip
    table = summary.reasons_markdown(limit=2).splitlines()
    assert table[0] == "| reason | count | sample |"
    assert table[2].startswith("| out_of_range | 3 | record 5: out_of_range: year 3000")
    assert table[3].startswith("| invalid_json | 2 | record 1: invalid_json")
    assert table[4] == "| (2 more kinds) | 2 | |"
    assert "x\\|y" in summary.reasons_markdown()


def test_unwritable_values_never_reach_a_written_row(tmp_path):
    data = b"".join(
        [
            line(rec("1", title=WRITABLE_ODDITIES)),
            line(rec("2\ud800x", title="\ud800")),  # bad pmid: its reject row carries it
            line(rec("3", title="emoji \U0001f600")),
        ]
    )
    drop, out_dir = batch(tmp_path, "b.jsonl", data)
    summary = write_papers(drop, out_dir)
    assert (summary.accepted, summary.rejected) == (2, 1)
    papers = {p["pmid"]: p for p in pq.read_table(out_dir / "papers.parquet").to_pylist()}
    assert papers["1"]["title"] == WRITABLE_ODDITIES  # kept exactly, not cleaned
    assert papers["3"]["title"] == "emoji \U0001f600"
    [reject] = pq.read_table(out_dir / "rejects.parquet").to_pylist()
    assert reject["pmid"] == "2\ufffdx" and reject["reason"].startswith("bad_pmid")
    assert "\\ud800" in reject["excerpt"]  # the raw line, escape and all
    assert write_chunks(out_dir).chunks == 2
    chunks = pq.read_table(out_dir / "chunks.parquet").to_pylist()
    assert WRITABLE_ODDITIES in chunks[0]["document"]
