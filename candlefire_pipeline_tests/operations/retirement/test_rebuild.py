"""The way back: a retired Chroma (files deleted, a drop passed over) rebuilt from the ledger's
batch files, checked against the ledger, and only then a rollback target; a rebuild cut short
leaves it retired and a re-run finishes it; a store that does not hold what was written stays
retired. Real stores, the core stages (generations/deployment.py), no Dagster."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace

import pyarrow.compute as pc
import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.retirement import files
from candlefire_pipeline.operations.retirement.commands import check_retirable, unretire
from candlefire_pipeline.operations.serving.commands import Order
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.machine import CHANGED, REFUSED, UNCHANGED
from candlefire_pipeline.operations.serving.state import (
    PROMOTED,
    Retirement,
    ServingState,
    read_state,
)
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import build, drop_tables, ingest

SINCE = "2026-02-20T00:00:00+00:00"


def hashes(store: str, settings) -> dict[str, str]:
    with opened_backend(store, settings) as backend:
        return backend.chunk_hashes()


@pytest.fixture
def retired(tmp_path, monkeypatch, pg_dsn):
    """Drops 1-2 in every store (and generation dim32's), then Chroma retired: drop 3 written
    to pgvector and Qdrant only (Chroma's steps passed over it), the ledger state exported and
    Chroma's folder deleted. Yields (settings, the generation's settings, the drop keys)."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    keys = [d.name for d in write_demo_drops(settings.drops_dir)]
    ingest(settings, keys[0], [])
    generation = create_generation(settings, "dim32", "hashing-v1:32")
    ingest(settings, keys[1], [])
    build(settings, generation, keys[:2])
    retirement = Retirement(SINCE, "r-soak", 21.5)
    state = ServingState(PROMOTED, SINCE, "r-1", "set up", "tester", "setup",
                         retired={"chroma": retirement})  # fmt: skip
    settings.serving_file.write_text(state.to_json())
    ingest(replace(settings, stores=("pgvector", "qdrant")), keys[2], [generation])
    view = generation_settings(settings, generation)
    for batches in (settings.batches_dir, view.batches_dir):
        StoreLedger(batches, "chroma").pass_over(keys[2], {"retired_since": SINCE})
    export = files.export_ledger(settings, "chroma", retirement)
    assert files.delete_files(settings, "chroma", lambda _: None) > 0
    yield settings, view, keys, export
    drop_tables(settings)


class Killed(RuntimeError):
    """The process dies here (as a kill would stop it)."""


def killed_after(writes: int):
    """An opener whose Chroma dies on its `writes`+1-th write."""
    done = []

    @contextmanager
    def opener(store, settings):
        with opened_backend(store, settings) as backend:
            real = backend.replace_papers

            def replace_papers(rows, progress=None):
                if len(done) == writes:
                    raise Killed("killed mid-unretire")
                done.append(rows.num_rows)
                return real(rows, progress)

            backend.replace_papers = replace_papers
            yield backend

    return opener


def test_the_export_records_what_the_deleted_files_held(retired):
    settings, view, keys, export = retired
    record = json.loads(export.read_text())
    assert not settings.chroma_path.exists()
    default, dim32 = record["targets"]
    assert (default["generation"], dim32["generation"]) == ("default", "dim32")
    assert sorted(default["applied"]) == keys[:2] and default["passed_over"] == [keys[2]]
    assert default["rebuild_view"] == keys
    assert default["expected_chunks"] == len(expected_chunks(settings.batches_dir, keys))
    assert record["retired"] == {"since": SINCE, "report_id": "r-soak", "reference_p95_ms": 21.5}
    said: list[str] = []
    assert files.delete_files(settings, "chroma", said.append) == 0 and "gone already" in said[0]


def test_an_unretire_cut_short_stays_retired_and_a_rerun_finishes_it(retired, pg_dsn):
    settings, view, keys, _ = retired
    with pytest.raises(Killed):
        unretire(settings, "chroma", Order("unretire", "back", "oncall"), opener=killed_after(1))
    assert read_state(settings.serving_file).reference_retired.since == SINCE
    held, wanted = hashes("chroma", settings), expected_chunks(settings.batches_dir, keys)
    assert 0 < len(held) < len(wanted)  # half-written, and not a rollback target
    assert StoreLedger(settings.batches_dir, "chroma").passed_over() == [keys[2]]
    assert not [h for h in history(pg_dsn, limit=50) if h["reason"].endswith(": back")]

    outcome = unretire(settings, "chroma", Order("unretire", "back", "oncall"))
    assert (outcome.decision.outcome, outcome.state.row) == (CHANGED, PROMOTED)
    assert outcome.state.retired == {}
    assert "chroma rebuilt from the ledger" in outcome.decision.message
    assert "of 3 batches, 2 target(s)" in outcome.decision.message
    assert hashes("chroma", settings) == wanted == hashes("pgvector", settings)
    assert hashes("chroma", view) == hashes("pgvector", view)  # the generation's target too
    for batches in (settings.batches_dir, view.batches_dir):
        ledger = StoreLedger(batches, "chroma")
        assert (sorted(ledger.applied()), ledger.passed_over(), ledger.interrupted()) == (
            keys, [], []
        )  # fmt: skip
    [row] = [h for h in history(pg_dsn, limit=50) if h["reason"].endswith(": back")]
    assert (row["event"], row["actor"], row["retired"]) == ("unretire", "oncall", None)


def test_a_store_that_does_not_hold_what_was_written_stays_retired(retired):
    settings, _, keys, _ = retired
    victim = sorted(expected_chunks(settings.batches_dir, keys))[0].split("_")[0]

    @contextmanager
    def lossy(store, target_settings):  # silently loses one paper's chunks
        with opened_backend(store, target_settings) as backend:
            real = backend.replace_papers
            backend.replace_papers = lambda rows, progress=None: real(
                rows.filter(pc.not_equal(rows["pmid"], victim)), progress
            )
            yield backend

    outcome = unretire(settings, "chroma", Order("unretire", "back", "oncall"), opener=lossy)
    assert outcome.decision.outcome == REFUSED
    assert "the rebuilt chroma differs from its ledger (" in outcome.decision.message
    assert "missing): still retired" in outcome.decision.message
    assert read_state(settings.serving_file).reference_retired is not None
    ledger = StoreLedger(settings.batches_dir, "chroma")
    assert sorted(ledger.applied()) == keys[:2] and ledger.passed_over() == [keys[2]]


def test_unretire_of_a_store_that_is_not_retired_changes_nothing(tmp_path, pg_dsn, monkeypatch):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)

    def never(*_):
        raise AssertionError("nothing is rebuilt when nothing is retired")

    outcome = unretire(
        settings, "chroma", Order("unretire", "just in case", "oncall"), opener=never
    )
    assert (outcome.decision.outcome, outcome.decision.message) == (
        UNCHANGED, "chroma is not retired: nothing to restore",
    )  # fmt: skip
    assert not settings.serving_file.exists()


@pytest.mark.parametrize(
    "store, error",
    [("qdrant", "leaving it out of CANDLEFIRE_STORES"), ("pgvector", "what serves"),
     ("milvus", "only chroma can be retired")],
)  # fmt: skip
def test_only_chroma_can_be_retired(store, error):
    with pytest.raises(ValueError, match=error):
        check_retirable(store)
