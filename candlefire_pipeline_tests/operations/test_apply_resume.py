"""apply_batch on every backend: intent markers, exact up-to-date checks, resuming cut applies."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.operations.indexing import apply_batch, read_store_rows
from candlefire_pipeline_tests.operations.batches import EMBEDDER, apply, paper, write_batch


def rows_where(batches, key: str, chunk_ids: list[str]) -> pa.Table:
    rows = read_store_rows(batches / key, key)
    return rows.filter(pc.is_in(rows["chunk_id"], value_set=pa.array(chunk_ids, pa.string())))


def intent(batches, key: str, store: str):
    return batches / key / f"applying-{store}.json"


def test_a_complete_apply_is_recorded_and_leaves_no_intent(backend, tmp_path):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1"), paper("2", sections=2)])
    summary = apply(backend, batches, "b1")
    assert (summary.papers_replaced, summary.rows_written, summary.resumed) == (2, 4, ())
    assert list(StoreLedger(batches, backend.name).applied()) == ["b1"]
    assert not intent(batches, "b1", backend.name).exists()
    again = apply(backend, batches, "b1")  # every paper up to date: nothing written
    assert (again.papers_unchanged, again.rows_written) == (2, 0)


def test_a_paper_left_with_old_and_new_chunks_is_rewritten(backend, tmp_path):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1", sections=3), paper("2")])
    apply(backend, batches, "b1")
    write_batch(batches, "b2", [paper("1", "v2", sections=2)])
    # what a cut Chroma write leaves: v2's first chunks upserted, v1's last one not yet deleted
    mixed = pa.concat_tables(
        [rows_where(batches, "b2", ["1_s0", "1_s1"]), rows_where(batches, "b1", ["1_s3"])]
    )
    backend.replace_papers(mixed)
    summary = apply(backend, batches, "b2")
    assert (summary.papers_replaced, summary.papers_unchanged) == (1, 0)
    assert backend.chunk_hashes() == expected_chunks(batches)


def test_a_paper_missing_one_new_chunk_is_rewritten(backend, tmp_path):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1", sections=3)])
    # every stored chunk is the batch's own (one paper_hash), but 1_s3 never arrived
    backend.replace_papers(rows_where(batches, "b1", ["1_s0", "1_s1", "1_s2"]))
    assert apply(backend, batches, "b1").papers_replaced == 1
    assert backend.chunk_hashes() == expected_chunks(batches)


def test_the_next_apply_of_another_batch_finishes_an_interrupted_one(backend, tmp_path):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1"), paper("2", sections=2), paper("3")])
    apply(backend, batches, "b1")
    write_batch(batches, "b2", [paper("2", "v2", sections=1), paper("4")], deletes=["3"])
    # b2 was cut after its intent and paper 4: paper 2 is still v1, paper 3 not deleted
    intent(batches, "b2", backend.name).write_text("{}")
    backend.replace_papers(rows_where(batches, "b2", ["4"]))
    write_batch(batches, "b3", [paper("5")])
    summary = apply(backend, batches, "b3")
    assert summary.resumed == ("b2",)
    assert StoreLedger(batches, backend.name).interrupted() == []
    assert sorted(StoreLedger(batches, backend.name).applied()) == ["b1", "b2", "b3"]
    assert backend.chunk_hashes() == expected_chunks(batches)


def test_a_batch_that_cannot_be_resumed_stays_marked_and_does_not_block(backend, tmp_path, caplog):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1")])
    write_batch(batches, "b2", [paper("2")])
    intent(batches, "b1", backend.name).write_text("{}")
    (batches / "b1" / "embeddings.parquet").unlink()  # being re-materialized, say
    with caplog.at_level(logging.WARNING):
        summary = apply(backend, batches, "b2")
    assert summary.resumed == () and summary.papers_replaced == 1
    assert StoreLedger(batches, backend.name).interrupted() == ["b1"]
    assert "batch b1 cannot be re-applied now" in caplog.text


def test_an_untracked_apply_writes_no_markers_and_resumes_nothing(backend, tmp_path):
    batches = tmp_path / "batches"
    write_batch(batches, "b1", [paper("1")])
    write_batch(batches, "b2", [paper("2")])
    intent(batches, "b1", backend.name).write_text("{}")
    summary = apply_batch(
        backend, batches, "b2", EMBEDDER.model_id, EMBEDDER.dim, record_applied=False
    )
    assert summary.resumed == () and StoreLedger(batches, backend.name).applied() == {}
    assert StoreLedger(batches, backend.name).interrupted() == ["b1"]
    assert not intent(batches, "b2", backend.name).exists()
