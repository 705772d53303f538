"""Reports that must never flip, run through the core on real pgvector and Chroma: a batch
applied while the report runs, and a query set with nothing to ground."""

from __future__ import annotations

import json
from datetime import datetime

import dagster as dg
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.operations.parity import (
    evaluate_report,
    latest_evaluation,
    open_named_stores,
    run_report,
)
from candlefire_pipeline.operations.serving.commands import auto_promote
from candlefire_pipeline.operations.serving.machine import CHANGED, INITIAL, REFUSED, read_state
from candlefire_pipeline.parity.gates import failed, gates_from_dicts
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, pipeline_env


@pytest.fixture
def staged(tmp_path, monkeypatch, pg_dsn):
    """Drop 1 in both stores; drop 2 parsed, chunked and embedded but applied to no store."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    drops = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(drops[0]).success
        assert pipeline.stage(drops[1]).success
    batch = next(d.name for d in settings.batches_dir.iterdir() if not applied_batches_of(d))
    yield settings, batch


def applied_batches_of(batch_dir) -> list:
    return list(batch_dir.glob("applied-*.json"))


class ApplyDuringRun:
    """pgvector whose first read waits for the next batch to land in both stores: what the
    sensor's ingest run does while a parity run is in flight."""

    def __init__(self, backend, apply) -> None:
        self._backend, self._apply = backend, apply

    def __getattr__(self, name: str):
        if name == "semantic_candidates" and self._apply is not None:
            apply, self._apply = self._apply, None
            apply()
        return getattr(self._backend, name)


def test_a_batch_applied_during_the_parity_run_never_flips(staged, pg_dsn, capsys):
    settings, batch = staged
    embedder = load_embedder(settings.model_id)
    with open_named_stores(settings) as stores:

        def apply_next_batch():
            for store in stores.values():
                apply_batch(store, settings.batches_dir, batch, embedder.model_id, embedder.dim)

        running = {**stores, "pgvector": ApplyDuringRun(stores["pgvector"], apply_next_batch)}
        report = run_report(settings, embedder, running)
    write_report(report, settings.reports_dir)
    applied_at = [
        StoreLedger(settings.batches_dir, s).applied()[batch] for s in ("pgvector", "chroma")
    ]
    started, created = (
        datetime.fromisoformat(t).timestamp() for t in (report.started_at, report.created_at)
    )
    assert started < min(applied_at) <= max(applied_at) < created  # it landed mid-run
    # so "created_at after the last applied batch" would have called this report fresh
    assert "report_is_fresh" in failed(gates_from_dicts(report.gates))  # as written
    gates = evaluate_report(settings, report)
    assert "report_is_fresh" in failed(gates) and batch in gates[0].detail  # and now

    outcome = auto_promote(settings, report, gates, dsn=pg_dsn)
    assert outcome.decision.outcome == REFUSED and "report_is_fresh" in outcome.decision.message
    assert candlefire(["promote", "--reason", "try the stale report"]) == 1
    assert "report_is_fresh" in capsys.readouterr().err
    assert read_state(settings.serving_file).state == INITIAL
    assert not settings.serving_file.exists()  # nothing half-written

    # the cure: a report that starts after the batch
    with open_named_stores(settings) as stores:
        write_report(run_report(settings, embedder, stores), settings.reports_dir)
    report, gates = latest_evaluation(settings)
    assert failed(gates) == []
    assert auto_promote(settings, report, gates, dsn=pg_dsn).decision.outcome == CHANGED


def test_a_report_with_no_grounding_terms_never_flips(staged, pg_dsn, tmp_path):
    settings, _ = staged
    termless = tmp_path / "termless.jsonl"
    queries = [q for q in load_queries()][:25]
    termless.write_text(
        "".join(
            json.dumps({"id": q.id, "text": q.text, "entities": [], "terms": []}) + "\n"
            for q in queries
        )  # fmt: skip
    )
    embedder = load_embedder(settings.model_id)
    with open_named_stores(settings) as stores:
        report = run_report(
            settings, embedder, stores, query_files=(termless,), include_default_queries=False
        )
    write_report(report, settings.reports_dir)
    assert report.aggregates["grounding_checks"] == 0
    gates = {g.name: g for g in evaluate_report(settings, report)}
    assert failed(list(gates.values())) == ["grounding_agreement"]
    assert "no grounding checks" in gates["grounding_agreement"].detail
    outcome = auto_promote(settings, report, list(gates.values()), dsn=pg_dsn)
    assert outcome.decision.outcome == REFUSED
    assert "grounding_agreement" in outcome.decision.message
    assert read_state(settings.serving_file).state == INITIAL
