"""Which paper version is current across batch directories."""

from __future__ import annotations

import pyarrow.parquet as pq

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.corpus.ledger import expected_chunks, superseded_pmids
from candlefire_pipeline_tests.corpus.bad_inputs import article, line, rec, xml_set


def add_batch(root, key: str, data: bytes, chunk: bool = True) -> None:
    drop = root / "drops" / key
    drop.parent.mkdir(exist_ok=True)
    drop.write_bytes(data)
    out_dir = root / "batches" / key
    write_papers(drop, out_dir)
    if chunk:
        write_chunks(out_dir)


def jsonl(*records: dict) -> bytes:
    return b"".join(line(r) for r in records)


def delete(*pmids: str) -> str:
    return "<DeleteCitation>" + "".join(f"<PMID>{p}</PMID>" for p in pmids) + "</DeleteCitation>"


def hashes(root, key: str) -> dict[str, str]:
    table = pq.read_table(root / "batches" / key / "chunks.parquet")
    ids, digests = table.column("chunk_id").to_pylist(), table.column("content_hash").to_pylist()
    return dict(zip(ids, digests, strict=True))


def test_superseded_pmids_sees_later_accepts_and_deletes_only(tmp_path):
    add_batch(tmp_path, "b1.jsonl", jsonl(rec("1"), rec("2"), rec("3"), rec("4")))
    add_batch(tmp_path, "b2.jsonl", jsonl(rec("1", title="newer")))
    add_batch(tmp_path, "b3.xml", xml_set(article("9"), delete("2")))
    (tmp_path / "batches" / "b4.jsonl").mkdir()  # no papers.parquet: not a batch yet
    batches = tmp_path / "batches"
    assert superseded_pmids(batches, "b1.jsonl", ["1", "2", "3", "4"]) == {"1", "2"}
    assert superseded_pmids(batches, "b2.jsonl", ["1", "2", "3"]) == {"2"}
    assert superseded_pmids(batches, "b3.xml", ["1", "2", "9"]) == set()
    assert superseded_pmids(batches, "b0", []) == set()


def test_batch_keys_compare_lexicographically(tmp_path):
    add_batch(tmp_path, "b10.jsonl", jsonl(rec("1")))
    add_batch(tmp_path, "b9.jsonl", jsonl(rec("1")))
    batches = tmp_path / "batches"
    # "b9.jsonl" sorts after "b10.jsonl": it is the later batch
    assert superseded_pmids(batches, "b10.jsonl", ["1"]) == {"1"}
    assert superseded_pmids(batches, "b9.jsonl", ["1"]) == set()


def test_expected_chunks_follows_replacements_deletes_and_re_adds(tmp_path):
    add_batch(tmp_path, "b1.jsonl", jsonl(rec("1"), rec("2"), rec("3")))
    full = rec("1", full_text="[Methods]\nWe measured TDP-43.")
    add_batch(tmp_path, "b2.jsonl", jsonl(full))
    add_batch(tmp_path, "b3.xml", xml_set(delete("2", "3")))
    add_batch(tmp_path, "b4.jsonl", jsonl(rec("2", title="back again")))
    add_batch(tmp_path, "b5.jsonl", jsonl(rec("7")), chunk=False)  # not chunked: not counted
    batches = tmp_path / "batches"
    expected = expected_chunks(batches)
    assert set(expected) == {"1_s0", "1_s1", "2"}  # old abstract-only chunk "1" is gone
    assert expected["1_s1"] == hashes(tmp_path, "b2.jsonl")["1_s1"]
    assert expected["2"] == hashes(tmp_path, "b4.jsonl")["2"]
    assert expected["2"] != hashes(tmp_path, "b1.jsonl")["2"]
    applied = expected_chunks(batches, ["b1.jsonl", "b2.jsonl", "b3.xml"])
    assert set(applied) == {"1_s0", "1_s1"}
    assert expected_chunks(batches, ["b1.jsonl"]) == hashes(tmp_path, "b1.jsonl")


def test_delete_then_re_add_in_one_file_keeps_the_paper(tmp_path):
    add_batch(tmp_path, "b1.jsonl", jsonl(rec("5"), rec("6")))
    add_batch(tmp_path, "b2.xml", xml_set(delete("5", "6"), article("5")))
    expected = expected_chunks(tmp_path / "batches")
    assert expected == hashes(tmp_path, "b2.xml")
    assert set(expected) == {"5"}


def test_missing_batches_dir_is_empty(tmp_path):
    assert expected_chunks(tmp_path / "nothing") == {}
    assert superseded_pmids(tmp_path / "nothing", "b1", ["1"]) == set()


def test_superseded_pmids_by_a_marker_sees_only_batches_holding_it(tmp_path):
    add_batch(tmp_path, "b1.jsonl", jsonl(rec("1"), rec("2")))
    add_batch(tmp_path, "b2.jsonl", jsonl(rec("1", title="newer")))
    add_batch(tmp_path, "b3.xml", xml_set(delete("2")))
    batches = tmp_path / "batches"
    marker = "applied-pgvector.json"
    assert superseded_pmids(batches, "b1.jsonl", ["1", "2"], marker=marker) == set()
    (batches / "b3.xml" / marker).write_text("{}")
    assert superseded_pmids(batches, "b1.jsonl", ["1", "2"], marker=marker) == {"2"}
    (batches / "b2.jsonl" / marker).write_text("{}")
    assert superseded_pmids(batches, "b1.jsonl", ["1", "2"], marker=marker) == {"1", "2"}
    assert superseded_pmids(batches, "b2.jsonl", ["1", "2"], marker=marker) == {"2"}
