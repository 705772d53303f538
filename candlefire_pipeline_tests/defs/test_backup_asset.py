"""store_backup: fails in one line while archiving is off; once on, each materialization takes a
backup, prunes to CANDLEFIRE_BACKUP_KEEP and records both as metadata; the schedule starts
stopped."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline.defs.backup_assets import store_backup, store_backup_schedule
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.operations.backup import commands
from candlefire_pipeline.operations.backup.manifest import backups
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.settings.backup import BackupSettings
from candlefire_pipeline_tests.operations.backup.steps import ingest, own_deployment
from candlefire_pipeline_tests.operations.batches import paper


@pytest.fixture
def deployment(monkeypatch):
    with own_deployment(monkeypatch) as settings:
        yield settings


def _materialize(instance, raise_on_error: bool = True):
    return dg.materialize(
        [store_backup],
        instance=instance,
        resources=build_resources(Settings.from_env()),
        raise_on_error=raise_on_error,
    )


def _metadata(result) -> dict:
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


@pytest.mark.server
def test_the_asset_backs_up_prunes_and_says_so(deployment, monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_BACKUP_KEEP", "1")
    settings = Settings.from_env()
    ingest(settings, "b1", [paper("1"), paper("2", sections=2)])
    folder = commands.default_backup_dir(settings)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        off = _materialize(instance, raise_on_error=False)
        assert not off.success
        (failure,) = [e for e in off.all_events if e.event_type_value == "STEP_FAILURE"]
        assert "candlefire backup enable" in failure.event_specific_data.error.message
        commands.enable_archiving(settings, folder)
        first = _metadata(_materialize(instance))
        ingest(settings, "b2", [paper("3")])
        second = _metadata(_materialize(instance))
    assert first["chunks"] == 4 and first["backups_removed"] == 0 and first["backup_mb"] > 0
    assert second["chunks"] == 5 and second["backups_removed"] == 1
    assert second["wal_files_removed"] > 0 and second["backups_kept"] == 1
    assert [m.label for m in backups(folder)] == [second["label"]]
    assert second["restorable_from"] == backups(folder)[0].ended_at


def test_the_nightly_schedule_starts_stopped_on_its_own_job():
    assert store_backup_schedule.cron_schedule == BackupSettings.cron == "30 3 * * *"
    assert store_backup_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert store_backup_schedule.job_name == "store_backup_job"
