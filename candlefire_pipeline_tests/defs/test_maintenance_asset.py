"""store_maintenance: the weekly schedule's asset records each store's health as metadata,
dry-runs on request, and fails loudly (with what it saw) when a store cannot be reached."""

from __future__ import annotations

import dagster as dg

from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.defs.maintenance_assets import (
    store_maintenance,
    store_maintenance_job,
    store_maintenance_schedule,
)
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, pipeline_env


def _materialize(instance, apply: bool, raise_on_error: bool = True):
    return dg.materialize(
        [store_maintenance],
        instance=instance,
        resources=build_resources(Settings.from_env()),
        run_config={"ops": {"store_maintenance": {"config": {"apply": apply}}}},
        raise_on_error=raise_on_error,
    )


def _metadata(result) -> dict:
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_the_asset_records_store_health_and_dry_runs(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    first = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert Pipeline(instance).ingest(first).success
        meta = _metadata(_materialize(instance, apply=False))
        assert meta["applied"] is False and meta["actions_done"] == 0
        assert meta["pgvector_live_tuples"] > 0 and meta["pgvector_dead_tuples"] >= 0
        assert meta["pgvector_hnsw_bytes"] > 0 and meta["pgvector_gin_bytes"] > 0
        assert meta["chroma_chunks"] > 0 and meta["qdrant_points"] == meta["chroma_chunks"]
        assert "store maintenance (dry run" in meta["report"]
        again = _metadata(_materialize(instance, apply=True))
        assert again["applied"] is True and again["actions_pending"] == 0


def test_an_unreachable_store_fails_the_run(tmp_path, monkeypatch, pg_dsn):
    pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    monkeypatch.setenv("CANDLEFIRE_QDRANT_URL", "http://127.0.0.1:1")
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = _materialize(instance, apply=True, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "qdrant: UNREACHABLE" in failure.event_specific_data.error.message


def test_the_weekly_schedule_runs_the_asset_with_apply():
    assert store_maintenance_schedule.cron_schedule == Settings.maintenance_cron == "0 4 * * 0"
    assert store_maintenance_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert store_maintenance_schedule.job_name == store_maintenance_job.name
    selection = store_maintenance_job.selection.resolve([store_maintenance])
    assert selection == {store_maintenance.key}
