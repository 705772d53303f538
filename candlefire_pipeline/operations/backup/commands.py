"""The backup and restore verbs on the core: enable WAL archiving, take a base backup, restore
one (to the end of the archive or to a point) and reconcile what was restored; the CLI
(cli_backup.py) prints what they return."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline.operations.backup.manifest import BackupManifest, backups, chosen
from candlefire_pipeline.operations.backup.reconcile import ReconcileReport, reconcile
from candlefire_pipeline.operations.backup.recover import recovered, swap_in
from candlefire_pipeline.operations.backup.take import embedded_server, take_backup
from candlefire_pipeline.operations.backup.tools import BackupError
from candlefire_pipeline.settings import Settings

__all__ = ["BackupError", "backups", "enable_archiving", "reconcile_only", "restore",
           "take_backup"]  # fmt: skip

log = logging.getLogger(__name__)


def default_backup_dir(settings: Settings) -> Path:
    """CANDLEFIRE_BACKUP_DIR, else data/backups; put it on another disk than data/pg (or pass
    `--backup-dir`) to survive its loss."""
    return settings.backup.folder or settings.data_dir / "backups"


def enable_archiving(settings: Settings, backup_dir: Path) -> bool:
    """WAL archived into backup_dir/wal from now on; True when it already was."""
    return archive.enable(embedded_server(settings), backup_dir)


@dataclass
class RestoreResult:
    manifest: BackupManifest
    to: str | None
    reconciled: ReconcileReport
    #: where the data directory that was replaced went (None: there was none)
    replaced: Path | None
    replay_seconds: float
    total_seconds: float


def restore(
    settings: Settings, backup_dir: Path, label: str | None = None, to: str | None = None
) -> RestoreResult:
    """Put backup `label` (default: the latest) back as data/pg, replayed to `to` (default: the
    end of the archive), the ledger re-applied and every check passed before it is swapped in;
    a failure raises BackupError and leaves data/pg untouched."""
    server = embedded_server(settings)
    manifest = chosen(backup_dir, label)
    start = time.perf_counter()
    if server.is_running():
        # the last segment written before the restore reaches the archive, then the store stops
        archive.archived_now(server.running_dsn(), backup_dir)
    note = f"restore of backup {manifest.label} to {to or 'the end of the WAL archive'}"
    with recovered(backup_dir, manifest, server.data_dir, to) as dsn:
        replayed = time.perf_counter() - start
        report = reconcile(settings, dsn, note)
        if not report.ok:
            raise BackupError(
                f"{note}: the restored store failed its checks, data/pg was not replaced: "
                + "; ".join(report.problems + report.checks.problems)
            )
    replaced = swap_in(server.data_dir)
    EmbeddedPostgres(server.data_dir).dsn  # noqa: B018 - serving again before we return
    return RestoreResult(manifest, to, report, replaced, replayed, time.perf_counter() - start)


def reconcile_only(settings: Settings, dsn: str) -> ReconcileReport:
    """The post-restore part alone, on a Postgres restored by other means (a provider's PITR)."""
    return reconcile(settings, dsn, "a restore outside candlefire (--reconcile-only)")
