"""The gated, reversible flip: parity_report -> blocking checks -> serving_backend."""

import dagster as dg
import psycopg
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.operations.serving import read_state
from candlefire_pipeline.operations.serving_history import history
from candlefire_pipeline.parity.report import load_latest
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    check_results,
    materialized,
    metadata,
    pipeline_env,
)


@pytest.fixture
def demo(tmp_path, monkeypatch, pg_dsn):
    """Both stores filled from the first demo drop; yields (settings, pipeline, drop names)."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    drops = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(drops[0]).success
        yield settings, pipeline, drops


def test_passing_checks_flip_to_pgvector_and_rollback_restores_chroma(demo, pg_dsn, capsys):
    settings, pipeline, _ = demo
    assert read_state(settings.serving_file).backend == "chroma"
    result = pipeline.parity()
    checks = check_results(result)
    assert checks and all(checks.values()), checks
    meta = metadata(result, "serving_backend")
    assert meta["serving_backend"] == "pgvector" and meta["flipped_now"]
    report_meta = metadata(result, "parity_report")
    assert "| " in report_meta["report"] and report_meta["mean_overlap"] >= 0.9
    state = read_state(settings.serving_file)
    assert (state.backend, state.report_id) == ("pgvector", report_meta["report_id"])
    assert candlefire(["rollback", "--reason", "test rollback"]) == 0
    assert read_state(settings.serving_file).backend == "chroma"
    assert [h["backend"] for h in history(pg_dsn)][:2] == ["chroma", "pgvector"]
    assert candlefire(["status"]) == 0
    assert "serving backend: chroma" in capsys.readouterr().out


def test_a_chunk_deleted_behind_the_pipelines_back_blocks_the_flip(demo, pg_dsn):
    settings, pipeline, _ = demo
    victim = load_any_full_text_chunk(settings)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {settings.pg_table} WHERE chunk_id = %s", (victim,))
    result = pipeline.parity()
    assert check_results(result)["chunk_counts_equal"] is False
    assert not materialized(result, "serving_backend")
    assert read_state(settings.serving_file).backend == "chroma"
    report = load_latest(settings.reports_dir)
    missing = [d for d in report.divergences if d.kind == "missing_chunk"]
    assert any(d.chunk_id == victim for d in missing), missing
    assert victim in report.to_markdown()


def test_a_report_older_than_the_last_ingested_batch_does_not_flip(demo):
    settings, pipeline, drops = demo
    assert pipeline.parity().success  # flips on the fresh report
    candlefire(["rollback", "--reason", "reset for the staleness test"])
    assert pipeline.ingest(drops[1]).success  # a newer batch: the report is now stale
    result = dg.materialize(
        pipeline_assets_for_serving(),
        instance=pipeline.instance,
        resources=pipeline_resources(),
        selection=["serving_backend"],
    )
    meta = metadata(result, "serving_backend")
    assert meta["serving_backend"] == "chroma" and "report_is_fresh" in meta["verdict"]
    assert read_state(settings.serving_file).backend == "chroma"


def load_any_full_text_chunk(settings) -> str:
    import pyarrow.parquet as pq

    batch = sorted(settings.batches_dir.iterdir())[0]
    ids = pq.read_table(batch / "chunks.parquet")["chunk_id"].to_pylist()
    return next(i for i in ids if i.endswith("_s1"))


def pipeline_assets_for_serving():
    from candlefire_pipeline.defs.parity_assets import parity_report, serving_backend

    return [parity_report, serving_backend]


def pipeline_resources():
    from candlefire_pipeline.defs.resources import build_resources
    from candlefire_pipeline.settings import Settings

    return build_resources(Settings.from_env())
