"""A report JSON written before parity over N stores (recorded by main at 499d9a5) still loads,
renders, is judged by the same gates, and feeds `candlefire status` and the serving reader."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg.version import ServerVersions
from candlefire_pipeline.operations.reader import ServingReader, ServingRefusedError
from candlefire_pipeline.operations.status import collect_status, format_status
from candlefire_pipeline.parity.gates import evaluate_gates, gates_from_dicts
from candlefire_pipeline.parity.report.files import load_latest, write_report
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.parity.shadow.gates import SHADOW_GATES
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env

RECORDED = Path(__file__).parents[1] / "recorded" / "parity-20250101T000000000000Z-before-n.json"
REPORT_ID = "20250101T000000000000Z-before-n"


@pytest.fixture
def old() -> dict:
    return json.loads(RECORDED.read_text())


def test_the_recorded_report_predates_every_new_field(old):
    assert not {"store_divergences", "unavailable", "plots"} & set(old)
    assert "stores" not in old["aggregates"] and "stage_latency_ms" not in old["aggregates"]
    assert not {"stage_ms", "vs_oracle"} & set(old["queries"][0])


def test_an_old_report_loads_renders_and_round_trips(old, tmp_path):
    report = ParityReport.from_dict(old)
    assert report.report_id == REPORT_ID and report.stores() == ["chroma", "pgvector"]
    assert (report.store_divergences, report.unavailable, report.plots) == ({}, {}, {})
    assert report.evaluated_stores() == [] and report.diverging_stores() == []
    md = report_markdown(report)
    assert "Not recorded: this report was written before the per-store comparison." in md
    assert "## Plots" not in md and "| gate | result |" in md
    assert set(report.headline()) >= {"mean_overlap", "p95_ratio", "ann_recall_pgvector"}
    write_report(report, tmp_path)
    assert report.plots == {} and not list(tmp_path.glob("*.png"))
    assert load_latest(tmp_path) == report


def test_an_old_report_is_judged_as_it_was_and_cannot_flip_without_conformance(old):
    report = ParityReport.from_dict(old)
    ledger = old["ledger"]["applied"]
    thresholds = ParityThresholds(**old["thresholds"])
    now = evaluate_gates(report, thresholds, ledger, ServerVersions("18.6", "0.8.6", "0.8.6"))
    recorded = gates_from_dicts(old["gates"])
    assert [dataclasses.astuple(g) for g in now[: len(recorded)]] == [
        dataclasses.astuple(g) for g in recorded
    ]
    # gates added since: the version floor and conformance fail on a report that predates them
    # (re-run it); live evidence is not required by default: those pass and say so
    added = {g.name: g for g in now[len(recorded) :]}
    assert list(added) == [
        "pgvector_version", "candlefire_conformance", "app_collection_agreement", *SHADOW_GATES
    ]  # fmt: skip
    assert not added["pgvector_version"].passed
    assert "does not record the pgvector version" in added["pgvector_version"].detail
    assert not added["candlefire_conformance"].passed
    assert added["candlefire_conformance"].detail.startswith("unknown")
    assert all(added[name].passed for name in SHADOW_GATES)
    # no app collection configured: nothing to adopt, not required
    assert added["app_collection_agreement"].passed
    assert added["app_collection_agreement"].shown_threshold == "not required"
    assert "not required" in added["shadow_queries"].detail


def test_status_and_the_serving_reader_read_an_old_report(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    settings.reports_dir.mkdir(parents=True)
    shutil.copy(RECORDED, settings.reports_dir / RECORDED.name)
    status = collect_status(settings)
    assert status.report_id == REPORT_ID and status.gates
    out = format_status(status)
    assert f"last parity report: {REPORT_ID}" in out and "report_is_fresh" in out
    # its ledger is not this deployment's: the reader refuses a forced pgvector, naming the gate
    forced = dataclasses.replace(settings, serving_override="pgvector")
    reader = ServingReader(forced, embedder=object())
    with pytest.raises(ServingRefusedError, match="report_is_fresh"):
        reader.retriever()
    reader.close()
