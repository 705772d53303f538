"""The ledger: which paper version is current, what each store applied, inventory diffs."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.corpus.ledger import (
    StoreLedger,
    diff_inventory,
    expected_chunks,
    snapshot,
    superseded_pmids,
)
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


@pytest.mark.parametrize(
    ("expected", "held", "missing", "orphaned", "stale"),
    [
        ({}, {}, [], [], []),  # vacuous: nothing expected, nothing held
        ({"a": "1", "b": "2"}, {"a": "1", "b": "2"}, [], [], []),
        ({"a": "1", "b": "2"}, {}, ["a", "b"], [], []),
        ({}, {"x": "9"}, [], ["x"], []),
        ({"b": "2", "a": "1", "c": "3"}, {"a": "1", "c": "old", "z": "0"}, ["b"], ["z"], ["c"]),
    ],
)
def test_diff_inventory_names_missing_orphaned_and_stale_chunks(
    expected, held, missing, orphaned, stale
):
    diff = diff_inventory(expected, held)
    assert (diff.missing, diff.orphaned, diff.stale) == (missing, orphaned, stale)
    assert diff.clean == (not (missing or orphaned or stale))
    assert diff.counts() == {"missing": len(missing), "orphaned": len(orphaned),
                             "stale": len(stale)}  # fmt: skip
    assert list(diff.as_dict()) == ["missing", "orphaned", "stale"]


def test_a_store_ledger_records_intents_and_applies_per_store(tmp_path):
    add_batch(tmp_path, "b1.jsonl", jsonl(rec("1"), rec("2")))
    add_batch(tmp_path, "b2.jsonl", jsonl(rec("1", title="newer")))
    batches = tmp_path / "batches"
    pg, chroma = StoreLedger(batches, "pgvector"), StoreLedger(batches, "chroma")
    assert (pg.applied(), pg.interrupted(), pg.expected_chunks()) == ({}, [], {})  # vacuous
    assert snapshot(batches, ("pgvector", "chroma")) == {"pgvector": {}, "chroma": {}}

    pg.begin("b2.jsonl", {"batch_key": "b2.jsonl"})
    assert pg.interrupted() == ["b2.jsonl"] and chroma.interrupted() == []
    assert pg.superseded("b1.jsonl", ["1", "2"]) == set()  # an intent is not an apply
    pg.finish("b2.jsonl", {"applied_at": 2.0})
    pg.finish("b1.jsonl", {"applied_at": 3.0})
    assert pg.interrupted() == [] and pg.applied() == {"b1.jsonl": 3.0, "b2.jsonl": 2.0}
    assert pg.superseded("b1.jsonl", ["1", "2"]) == {"1"}
    assert chroma.superseded("b1.jsonl", ["1", "2"]) == set()  # chroma applied nothing
    assert pg.expected_chunks() == expected_chunks(batches)
    assert snapshot(batches, ("pgvector", "chroma")) == {
        "pgvector": {"b1.jsonl": 3.0, "b2.jsonl": 2.0},
        "chroma": {},
    }
    assert (batches / "b2.jsonl" / "applied-pgvector.json").is_file()  # the on-disk contract


def test_a_store_ledger_over_a_missing_batches_dir_is_empty(tmp_path):
    ledger = StoreLedger(tmp_path / "nothing", "qdrant")
    assert (ledger.applied(), ledger.interrupted(), ledger.expected_chunks()) == ({}, [], {})
