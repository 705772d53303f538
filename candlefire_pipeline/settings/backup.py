"""Backups of the embedded Postgres: where they go, how many are kept, when the schedule takes
one (docs/OPERATIONS.md, "Backup and restore")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.settings.env import check_between, env_int, env_path, env_str


@dataclass(frozen=True)
class BackupSettings:
    #: CANDLEFIRE_BACKUP_DIR: the backup folder (base backups and the WAL archive); None:
    #: <data dir>/backups. Put it on another disk than data/pg.
    folder: Path | None = None
    #: CANDLEFIRE_BACKUP_KEEP: backups kept by each prune (the WAL before the oldest goes too)
    keep: int = 2
    #: CANDLEFIRE_BACKUP_CRON: store_backup_schedule (UTC; the schedule starts stopped)
    cron: str = "30 3 * * *"

    def __post_init__(self) -> None:
        check_between("CANDLEFIRE_BACKUP_KEEP", self.keep, 1, 1000)

    @classmethod
    def from_env(cls) -> BackupSettings:
        return cls(
            folder=env_path("CANDLEFIRE_BACKUP_DIR"),
            keep=env_int("CANDLEFIRE_BACKUP_KEEP", cls.keep),
            cron=env_str("CANDLEFIRE_BACKUP_CRON", cls.cron),
        )
