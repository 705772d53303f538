"""The gated, reversible flip through Dagster: parity_report -> blocking checks ->
serving_backend, with the default thresholds (no test raises one to make a flip pass). The p95
gate is measured but not deciding in them (pipeline_env: two stores' timings on a shared machine
say how busy it was); test_the_p95_gate_blocks_a_flip_for_real holds it to its default."""

import logging

import dagster as dg
import psycopg
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    INITIAL,
    PINNED,
    PROMOTED,
    read_state,
)
from candlefire_pipeline.parity.gates import GATES
from candlefire_pipeline.parity.report.files import load_latest
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    check_results,
    materialized,
    metadata,
    pipeline_env,
)

#: what an empty or emptied deployment must fail, each by name
NO_EVIDENCE = {"corpus_size", "queries_with_results", "stores_hold_current_versions"}


def _demo(tmp_path, monkeypatch, pg_dsn, latency_gate: bool = False):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, latency_gate=latency_gate)
    drops = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(drops[0]).success
        yield settings, pipeline, drops


@pytest.fixture
def demo(tmp_path, monkeypatch, pg_dsn):
    """Both stores filled from the first demo drop; yields (settings, pipeline, drop names)."""
    yield from _demo(tmp_path, monkeypatch, pg_dsn)


@pytest.fixture
def timed_demo(tmp_path, monkeypatch, pg_dsn):
    """The same, with the p95 gate held to its threshold."""
    yield from _demo(tmp_path, monkeypatch, pg_dsn, latency_gate=True)


def failed_checks(result) -> set[str]:
    return {name for name, passed in check_results(result).items() if not passed}


def test_a_rollback_holds_against_the_schedule_and_reruns_until_promote(demo, pg_dsn, capsys):
    settings, pipeline, _ = demo
    assert read_state(settings.serving_file).state == INITIAL
    first = pipeline.parity()
    assert set(check_results(first)) == {*GATES, "serving_not_degraded"}
    assert not failed_checks(first)
    meta = metadata(first, "serving_backend")
    assert (meta["serving_backend"], meta["flipped_now"], meta["decision"]) == (
        "pgvector", True, "changed",
    )  # fmt: skip
    report_id = metadata(first, "parity_report")["report_id"]
    assert "| report_is_fresh | pass |" in metadata(first, "parity_report")["gates"]
    assert read_state(settings.serving_file).report_id == report_id
    # a re-run while promoted: nothing to do, nothing recorded
    again = metadata(pipeline.serving_only(), "serving_backend")
    assert (again["serving_backend"], again["decision"]) == ("pgvector", "unchanged")

    assert candlefire(["rollback", "--reason", "bad answers in prod", "--by", "oncall"]) == 0
    pinned = read_state(settings.serving_file)
    assert (pinned.state, pinned.actor, pinned.report_id) == (PINNED, "oncall", report_id)

    nightly = pipeline.scheduled_parity_run()  # a new report passing every gate
    assert nightly.success and not failed_checks(nightly)
    nightly_id = metadata(nightly, "parity_report")["report_id"]
    for meta in (
        metadata(nightly, "serving_backend"),
        metadata(pipeline.serving_only(), "serving_backend"),  # re-run with the same report
    ):
        assert (meta["serving_backend"], meta["decision"], meta["pinned"]) == (
            "chroma", "refused", True,
        )  # fmt: skip
        assert (
            meta["pin_reason"] == "bad answers in prod" and "candlefire promote" in meta["verdict"]
        )
        assert "| mean_overlap | pass |" in meta["gates"]
    assert read_state(settings.serving_file) == pinned

    assert candlefire(["status"]) == 0
    out = capsys.readouterr().out
    assert "PINNED by oncall" in out and "bad answers in prod" in out
    assert "passes every gate" in out and "p95_ratio" in out and "threshold" in out

    # the only way out of the pin: promote, on a report newer than the pin
    assert candlefire(["promote", "--reason", "fixed upstream", "--by", "oncall"]) == 0
    promoted = read_state(settings.serving_file)
    assert (promoted.state, promoted.report_id, promoted.event) == (PROMOTED, nightly_id, "promote")
    rows = history(pg_dsn)[:3]
    assert [(r["state"], r["event"], r["report_id"]) for r in rows] == [
        (PROMOTED, "promote", nightly_id),
        (PINNED, "rollback", report_id),
        (PROMOTED, "auto_promote", report_id),
    ]
    assert rows[1]["reason"] == "bad answers in prod" and rows[0]["actor"] == "oncall"


def test_an_empty_deployment_never_flips(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        result = pipeline.parity()
        assert NO_EVIDENCE | {"report_is_fresh"} <= failed_checks(result)
        assert not materialized(result, "serving_backend")
        meta = metadata(pipeline.serving_only(), "serving_backend")  # run on its own
    assert (meta["serving_backend"], meta["decision"]) == ("chroma", "refused")
    assert NO_EVIDENCE | {"report_is_fresh"} <= set(meta["failed_gates"].split(", "))
    assert "| corpus_size | FAIL | 0 |" in meta["gates"]
    assert read_state(settings.serving_file).state == INITIAL


def test_emptied_stores_never_flip(demo):
    settings, pipeline, _ = demo
    from candlefire_pipeline.backends.factory import open_backend

    for name in ("pgvector", "chroma"):
        store = open_backend(name, settings)
        store.reset()
        store.close()
    result = pipeline.parity()
    assert NO_EVIDENCE <= failed_checks(result)
    assert "report_is_fresh" not in failed_checks(result)  # the ledger did not move
    assert not materialized(result, "serving_backend")
    assert read_state(settings.serving_file).state == INITIAL
    report = load_latest(settings.reports_dir)
    assert report.store_diffs["pgvector"]["missing"] == report.chunk_counts["memory"] > 0


def test_a_chunk_deleted_behind_the_pipelines_back_blocks_the_flip(demo, pg_dsn):
    settings, pipeline, _ = demo
    victim = load_any_full_text_chunk(settings)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {settings.pg_table} WHERE chunk_id = %s", (victim,))
    result = pipeline.parity()
    assert failed_checks(result) == {"chunk_counts_equal", "stores_hold_current_versions"}
    assert not materialized(result, "serving_backend")
    assert read_state(settings.serving_file).backend == "chroma"
    report = load_latest(settings.reports_dir)
    missing = [d for d in report.divergences if d.kind == "missing_chunk"]
    assert any(d.chunk_id == victim for d in missing), missing
    assert report.store_diffs["pgvector"]["missing_ids"] == [victim]
    assert victim in report_markdown(report)


def test_a_report_older_than_the_last_ingested_batch_does_not_flip(demo):
    settings, pipeline, drops = demo
    report_only = pipeline.parity(selection=["parity_report"])
    assert not failed_checks(report_only)
    assert pipeline.ingest(drops[1]).success  # a newer batch: the report is now stale
    meta = metadata(pipeline.serving_only(), "serving_backend")
    assert (meta["serving_backend"], meta["decision"]) == ("chroma", "refused")
    assert meta["failed_gates"] == "report_is_fresh"
    assert "applied after the report read the ledger" in meta["gates"]
    assert read_state(settings.serving_file).state == INITIAL


def test_the_p95_gate_blocks_a_flip_for_real(timed_demo):
    """pgvector made genuinely slower (latency added to its reads): with the default threshold
    the p95 gate alone fails, and serving stays on Chroma."""
    settings, pipeline, _ = timed_demo
    result = pipeline.parity(slow_pgvector_s=0.05)
    assert failed_checks(result) == {"p95_ratio"}
    assert not materialized(result, "serving_backend")
    assert read_state(settings.serving_file).state == INITIAL
    report = load_latest(settings.reports_dir)
    assert report.thresholds["p95_ratio"] == ParityThresholds().p95_ratio == 1.5
    assert report.p95_ratio() > 1.5


def load_any_full_text_chunk(settings) -> str:
    import pyarrow.parquet as pq

    batch = sorted(settings.batches_dir.iterdir())[0]
    ids = pq.read_table(batch / "chunks.parquet")["chunk_id"].to_pylist()
    return next(i for i in ids if i.endswith("_s1"))


def error_lines(instance: dg.DagsterInstance, result) -> list[str]:
    return [
        entry.user_message
        for entry in instance.all_logs(result.run_id)
        if entry.level >= logging.ERROR and entry.user_message
    ]


def test_a_promoted_deployment_watches_its_reports_degrades_then_rolls_itself_back(
    demo, pg_dsn, monkeypatch
):
    """Promoted, then a chunk deleted behind the pipeline's back: the next report fails its
    gates, so the switch turns DEGRADED (error log line, failing check); with the auto-rollback
    on (2 windows), the next failing report pins Chroma, and the schedule cannot undo it."""
    settings, pipeline, _ = demo
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK", "on")
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK_WINDOWS", "2")
    healthy = pipeline.parity()
    assert check_results(healthy)["serving_not_degraded"]
    # the report runs before serving_backend promotes on it: nothing to watch yet
    assert "never promoted" in metadata(healthy, "parity_report")["serving_watch"]
    assert read_state(settings.serving_file).state == PROMOTED
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {settings.pg_table} WHERE chunk_id = %s",
                     (load_any_full_text_chunk(settings),))  # fmt: skip

    first = pipeline.parity()
    degraded = read_state(settings.serving_file)
    assert (degraded.state, degraded.backend) == (DEGRADED, "pgvector")
    first_id = metadata(first, "parity_report")["report_id"]
    assert degraded.failing == {"parity_report": [first_id]}
    assert not check_results(first)["serving_not_degraded"]
    assert not materialized(first, "serving_backend")  # the gate checks block it
    assert any("SERVING DEGRADED" in line for line in error_lines(pipeline.instance, first))

    second = pipeline.parity()
    pin = read_state(settings.serving_file)
    assert (pin.state, pin.actor) == (PINNED, "dagster:parity_report")
    assert pin.reason.startswith("auto-rollback after 2 failing parity_report windows")
    assert not check_results(second)["serving_not_degraded"]
    assert any("AUTO-ROLLBACK" in line for line in error_lines(pipeline.instance, second))
    rerun = metadata(pipeline.serving_only(), "serving_backend")
    assert (rerun["serving_backend"], rerun["decision"], rerun["healthy"]) == (
        "chroma", "refused", False,
    )  # fmt: skip
    assert read_state(settings.serving_file) == pin
