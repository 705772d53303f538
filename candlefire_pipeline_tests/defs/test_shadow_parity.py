"""shadow_parity through Dagster on real stores: live traffic through the reader becomes a window
with its checks and plots; a promoted deployment whose stores drift apart turns DEGRADED on the
next window; required live evidence gates the flip (never a vacuous pass); the cadence."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.definitions import defs
from candlefire_pipeline.defs.parity_checks import parity_checks
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.defs.shadow_assets import SHADOW_PARITY, shadow_checks, shadow_parity
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.state import DEGRADED, INITIAL, PROMOTED, read_state
from candlefire_pipeline.operations.shadow.served import ShadowWorker
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.shadow.window import load_latest_window
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    check_results,
    materialized,
    metadata,
    pipeline_env,
)

QUERIES = load_queries()[:24]  # more than the 20 comparisons a window needs to be judged


@pytest.fixture
def demo(tmp_path, monkeypatch, fresh_pg_dsn):
    """Every store filled from the first demo drop, in a database of its own."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", fresh_pg_dsn)
    monkeypatch.setenv("CANDLEFIRE_SHADOW_RATE", "1.0")
    first = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(first).success
        yield Settings.from_env(), pipeline


def live_traffic(settings: Settings, queries=QUERIES) -> None:
    """The app's requests through the reader, shadowed at rate 1.0, until all are recorded."""
    embedder = load_embedder(settings.model_id)
    with ShadowWorker(settings) as worker, ServingReader(settings, embedder, shadow=worker) as r:
        for query in queries:
            r.retrieve(query.text, query.entities, query.terms)
        assert worker.drain(600)
    assert worker.stats.done == len(queries)


def window_run(pipeline: Pipeline) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [shadow_parity, *shadow_checks],
        instance=pipeline.instance,
        resources=build_resources(Settings.from_env()),
        raise_on_error=False,
    )


def plot_pngs(markdown: str) -> list[bytes]:
    found = re.findall(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    return [base64.b64decode(data) for data in found]


def test_a_promoted_deployment_is_watched_on_live_traffic(demo, capsys):
    settings, pipeline = demo
    assert metadata(pipeline.parity(), "serving_backend")["serving_backend"] == "pgvector"
    live_traffic(settings)
    healthy = window_run(pipeline)
    meta = metadata(healthy, "shadow_parity")
    assert (
        meta["samples"] == len(QUERIES) and "| pgvector -> chroma | 24 | 24 | 0 |" in meta["window"]
    )
    assert check_results(healthy) == dict.fromkeys(
        ["shadow_queries", "shadow_agreement", "shadow_errors", "serving_not_degraded"], True
    )
    assert "healthy" in meta["serving_watch"] and meta["failed_gates"] == "none"
    pngs = plot_pngs(meta["plots"])
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG") for p in pngs)
    assert candlefire(["status"]) == 0
    out = capsys.readouterr().out
    assert f"last shadow window: {meta['window_id']}" in out
    assert "pgvector -> chroma: 24 samples, mean overlap" in out

    # the stores drift apart behind the pipeline's back: Chroma loses the papers it answered
    window = load_latest_window(settings.reports_dir)
    assert window.target("pgvector", "chroma").mean_overlap >= 0.9
    chroma = open_backend("chroma", settings)
    try:
        with ServingReader(settings, load_embedder(settings.model_id)) as reader:
            answer = reader.retriever().retrieve  # not reader.retrieve: no shadow here
            victims = {p for q in QUERIES for p in answer(q.text, list(q.entities)).pmids[:5]}
        chroma.delete_papers(sorted(victims))
    finally:
        chroma.close()
    live_traffic(settings)
    drifted = window_run(pipeline)
    meta = metadata(drifted, "shadow_parity")
    checks = check_results(drifted)
    assert not checks["shadow_agreement"] and not checks["serving_not_degraded"]
    assert (
        "shadow_agreement" in meta["failed_gates"] and "SERVING DEGRADED" in meta["serving_watch"]
    )
    state = read_state(settings.serving_file)
    assert (state.state, list(state.failing)) == (DEGRADED, ["shadow_parity"])
    pair = load_latest_window(settings.reports_dir).target("pgvector", "chroma")
    assert pair.mean_overlap < 0.9 and pair.divergences_by_kind.get("missing_chunk", 0) > 0
    assert "missing_chunk" in pair.worst[0]["causes"] and "missing_chunk" in meta["report"]


def test_required_live_evidence_gates_the_flip_never_vacuously(demo, monkeypatch):
    settings, pipeline = demo
    monkeypatch.setenv("CANDLEFIRE_PARITY_MIN_SHADOW_QUERIES", "20")
    first = pipeline.parity()  # no shadow window at all
    failed = {name for name, passed in check_results(first).items() if not passed}
    assert failed == {"shadow_queries", "shadow_agreement", "shadow_errors"}
    assert not materialized(first, "serving_backend")
    assert read_state(settings.serving_file).state == INITIAL

    live_traffic(Settings.from_env(), QUERIES[:10])  # too few: still failing
    assert not check_results(window_run(pipeline))["shadow_queries"]
    assert not materialized(pipeline.parity(), "serving_backend")

    live_traffic(Settings.from_env(), QUERIES[10:])  # chroma serves, pgvector in the shadow
    assert all(check_results(window_run(pipeline)).values())
    flipped = pipeline.parity()
    assert metadata(flipped, "serving_backend")["decision"] == "changed"
    assert read_state(settings.serving_file).state == PROMOTED


def test_shadow_parity_refreshes_on_its_cadence(demo):
    _, pipeline = demo
    start = datetime(2026, 6, 1, 12, 1, tzinfo=UTC)

    def requested(at: datetime, cursor):
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=pipeline.instance, cursor=cursor, evaluation_time=at
        )
        return bool(result.get_num_requested(SHADOW_PARITY)), result.cursor

    wanted, cursor = requested(start, None)
    wanted, cursor = requested(start + timedelta(minutes=1), cursor)
    assert not wanted  # no quarter hour passed
    wanted, cursor = requested(start + timedelta(minutes=15), cursor)  # 12:16: 12:15 passed
    assert wanted
    wanted, cursor = requested(start + timedelta(minutes=16), cursor)
    assert not wanted  # handled for this tick


def test_every_gate_has_one_check_and_the_live_gates_one_on_shadow_parity():
    on_report = [key.name for c in parity_checks for key in c.check_keys]
    assert len(on_report) == len(set(on_report)) and "shadow_agreement" in on_report
    assert {key.name for c in shadow_checks for key in c.check_keys} == {
        "shadow_queries", "shadow_agreement", "shadow_errors", "serving_not_degraded",
    }  # fmt: skip
