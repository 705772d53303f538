"""store_backup: a base backup of the embedded Postgres, then the prune, on a schedule (core
logic in operations/backup/).

An asset for the same reason as store_maintenance: each night's backup (label, bytes, the
point a restore can reach back to) stays in the materialization history, where an operator
looks for "when did the last good backup finish". The schedule starts stopped: WAL archiving
is switched on by `candlefire backup enable` (it restarts the server), and a schedule that
failed every night before that would teach people to ignore it.
"""

import dagster as dg

from candlefire_pipeline.operations.backup import commands
from candlefire_pipeline.operations.backup.archive import wal_dir
from candlefire_pipeline.operations.backup.prune import prune
from candlefire_pipeline.operations.backup.tools import tree_bytes
from candlefire_pipeline.settings import code_location_settings


@dg.asset(
    group_name="maintenance",
    kinds={"postgres"},
    required_resource_keys={"pipeline"},
    description=(
        "A base backup of the embedded Postgres with WAL archived beside it (pg_basebackup, "
        "checked by pg_verifybackup), then the backups beyond CANDLEFIRE_BACKUP_KEEP and the WAL "
        "before the oldest kept one removed (store_backup_schedule, stopped until `candlefire "
        "backup enable`). Restore: `candlefire restore`."
    ),
)
def store_backup(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    settings = context.resources.pipeline.settings()
    folder = commands.default_backup_dir(settings)
    try:
        manifest = commands.take_backup(settings, folder)
        context.log.info(f"backup {manifest.describe()}")
        pruned = prune(folder, settings.backup.keep, apply=True)
    except commands.BackupError as exc:
        raise dg.Failure(description=f"store_backup: {exc}") from exc
    for line in pruned.lines(applied=True):
        context.log.info(line)
    oldest = pruned.kept[0]
    return dg.MaterializeResult(
        metadata={
            "label": manifest.label,
            "backup_mb": round(manifest.bytes / 1e6, 1),
            "seconds": manifest.seconds,
            "chunks": sum(manifest.chunks.values()),
            "wal_range": f"{manifest.start_lsn}..{manifest.end_lsn} (timeline {manifest.timeline})",
            "backups_kept": len(pruned.kept),
            "backups_removed": len(pruned.bases),
            "wal_files_removed": len(pruned.segments),
            "removed_mb": round(pruned.bytes / 1e6, 1),
            "restorable_from": oldest.ended_at,
            "wal_archive_mb": round(tree_bytes(wal_dir(folder)) / 1e6, 1),
            "folder": dg.MetadataValue.path(str(folder)),
        }
    )


store_backup_job = dg.define_asset_job(
    "store_backup_job",
    selection=[store_backup],
    description="store_backup on its own (the nightly schedule's job).",
)

store_backup_schedule = dg.ScheduleDefinition(
    name="store_backup_schedule",
    job=store_backup_job,
    cron_schedule=code_location_settings().backup.cron,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Nightly by default (CANDLEFIRE_BACKUP_CRON, 03:30 UTC): store_backup. Stopped "
    "until turned on, after `candlefire backup enable` has switched WAL archiving on.",
)
