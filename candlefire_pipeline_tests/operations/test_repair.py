"""repair_store on every backend: vacuous, clean, damaged, interrupted and refused cases."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.operations.indexing import read_store_rows
from candlefire_pipeline.operations.repair import (
    RepairRefusedError,
    format_repair,
    plan_repair,
    repair_store,
)
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors
from candlefire_pipeline_tests.operations.batches import EMBEDDER, apply, paper, write_batch


def first_batch(batches):
    """b1: papers 1-4 (2 and 4 with full text)."""
    papers = [paper("1"), paper("2", sections=2), paper("3"), paper("4", sections=1)]
    write_batch(batches, "b1", papers)


def second_batch(batches):
    """b2: paper 3 changed, 5 new, 4 deleted (a MEDLINE DeleteCitation)."""
    write_batch(batches, "b2", [paper("3", "v2"), paper("5")], deletes=["4"])


@pytest.fixture
def ledger(tmp_path):
    """Both batches on disk before any is applied (as after a burst of drops)."""
    batches = tmp_path / "batches"
    first_batch(batches)
    second_batch(batches)
    return batches


def rows_of(batches, key: str, pmids: list[str]) -> pa.Table:
    rows = read_store_rows(batches / key, key)
    return rows.filter(pc.is_in(rows["pmid"], value_set=pa.array(pmids, pa.string())))


def foreign_rows(chunks: list[dict]) -> pa.Table:
    """Rows for the test model that no batch in the ledger holds."""
    vectors = unit_vectors(len(chunks), EMBEDDER.dim, seed=7)
    return make_rows(chunks, vectors, model_id=EMBEDDER.model_id, dim=EMBEDDER.dim)


def current(batches, backend) -> dict[str, str]:
    return expected_chunks(batches, StoreLedger(batches, backend.name).applied())


def test_empty_ledger_and_empty_store_is_clean(backend, tmp_path):
    report = repair_store(backend, tmp_path / "batches", apply=True)
    assert report.plan.clean and report.converged and not report.applied
    assert (report.plan.expected_chunks, report.plan.store_chunks) == (0, 0)
    assert "nothing to do" in format_repair(report)


def test_store_that_matches_the_ledger_is_clean(backend, ledger):
    apply(backend, ledger, "b1")
    apply(backend, ledger, "b2")
    plan = plan_repair(backend, ledger)
    assert plan.clean and plan.counts == {"missing": 0, "stale": 0, "orphaned": 0}
    assert plan.batches == ["b1", "b2"] and plan.expected_chunks == plan.store_chunks == 6


def damage(backend, batches) -> None:
    """Paper 2 deleted, paper 3 stale, an unknown paper 99, an extra chunk on paper 1."""
    backend.delete_papers(["2"])
    stale = rows_of(batches, "b2", ["3"])
    stale = stale.set_column(
        stale.schema.get_field_index("content_hash"), "content_hash", pa.array(["edited"])
    )
    backend.replace_papers(stale)
    extra = foreign_rows([chunk("1", 5, content_hash="x-1-5")])
    backend.replace_papers(pa.concat_tables([rows_of(batches, "b1", ["1"]), extra]))
    backend.replace_papers(foreign_rows([chunk("99")]))


def test_dry_run_reports_every_kind_and_writes_nothing(backend, ledger):
    apply(backend, ledger, "b1")
    apply(backend, ledger, "b2")
    damage(backend, ledger)
    before = backend.chunk_hashes()
    report = repair_store(backend, ledger)
    plan = report.plan
    assert (plan.missing, plan.stale, plan.orphaned) == (["2_s0", "2_s1", "2_s2"], ["3"],
                                                         ["1_s5", "99"])  # fmt: skip
    assert plan.rewrite == {"b1": ["1", "2"], "b2": ["3"]} and plan.delete == ["99"]
    assert not report.applied and not report.converged
    assert backend.chunk_hashes() == before
    text = format_repair(report)
    assert "missing: 3 (2_s0, 2_s1, 2_s2)" in text and "run again with --apply" in text


def test_apply_fixes_every_kind_and_converges(backend, ledger):
    apply(backend, ledger, "b1")
    apply(backend, ledger, "b2")
    damage(backend, ledger)
    report = repair_store(backend, ledger, apply=True)
    assert report.applied and report.converged and report.after.clean
    assert (report.papers_rewritten, report.papers_deleted, report.chunks_deleted) == (3, 1, 1)
    assert backend.chunk_hashes() == current(ledger, backend)
    assert "after: missing 0, stale 0, orphaned 0" in format_repair(report)
    assert repair_store(backend, ledger, apply=True).plan.clean  # idempotent


def test_rebuilds_an_emptied_store_from_the_ledger(backend, ledger):
    apply(backend, ledger, "b1")
    apply(backend, ledger, "b2")
    backend.delete_papers(list(backend.paper_chunks()))
    assert backend.count() == 0
    report = repair_store(backend, ledger, apply=True)
    assert report.converged and report.rows_written == 6
    assert backend.chunk_hashes() == current(ledger, backend)


def test_the_view_is_the_applied_batches_like_the_blocking_check(backend, ledger):
    # b1 alone applied: b2 (not applied yet) supersedes papers 3 and 4, but supersession only
    # counts batches the store holds, so b1 wrote them and the store already passes the ledger
    # check over its applied batches; applying b2 later replaces them as usual.
    apply(backend, ledger, "b1")
    plan = plan_repair(backend, ledger)
    assert plan.batches == ["b1"]
    assert (plan.missing, plan.stale, plan.orphaned) == ([], [], [])
    assert repair_store(backend, ledger, apply=True).converged
    assert backend.chunk_hashes() == expected_chunks(ledger, ["b1"])
    apply(backend, ledger, "b2")
    assert backend.chunk_hashes() == expected_chunks(ledger) == current(ledger, backend)


def test_interrupted_batch_is_reported_then_finished(backend, tmp_path):
    ledger = tmp_path / "batches"
    first_batch(ledger)
    apply(backend, ledger, "b1")
    second_batch(ledger)
    # b2 started: its intent marker exists, paper 5 was written; paper 3 and the delete not yet
    (ledger / "b2" / f"applying-{backend.name}.json").write_text(json.dumps({"batch_key": "b2"}))
    backend.replace_papers(rows_of(ledger, "b2", ["5"]))
    plan = plan_repair(backend, ledger)
    assert plan.interrupted == ["b2"] and plan.batches == ["b1", "b2"]
    assert (plan.missing, plan.stale, plan.orphaned) == ([], ["3"], ["4_s0", "4_s1"])
    assert plan.rewrite == {"b2": ["3"]} and plan.delete == ["4"]
    assert "interrupted applies: b2" in format_repair(repair_store(backend, ledger))

    report = repair_store(backend, ledger, apply=True)
    assert report.resumed == ["b2"] and report.converged
    assert StoreLedger(ledger, backend.name).interrupted() == []
    assert sorted(StoreLedger(ledger, backend.name).applied()) == ["b1", "b2"]
    assert backend.chunk_hashes() == expected_chunks(ledger)


def test_refuses_to_empty_a_store_the_ledger_does_not_know(backend, ledger):
    backend.replace_papers(rows_of(ledger, "b1", ["1", "2"]))  # written without markers
    before = backend.chunk_hashes()
    report = repair_store(backend, ledger)
    assert len(report.plan.orphaned) == 4 and report.plan.batches == []
    assert "refuses to run" in format_repair(report)
    with pytest.raises(RepairRefusedError, match="refusing to delete them all"):
        repair_store(backend, ledger, apply=True)
    assert backend.chunk_hashes() == before
