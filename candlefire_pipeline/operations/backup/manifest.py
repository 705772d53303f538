"""A backup's manifest: what it is (label, WAL range, bytes) and what the deployment said at
that moment (the ledger's applied batches per store table, the switch), beside its base."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.operations.backup.tools import BackupError

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BackupManifest:
    label: str
    #: when pg_basebackup started and ended (UTC ISO 8601)
    started_at: str
    ended_at: str
    timeline: int
    start_lsn: str
    end_lsn: str
    #: the WAL segment holding start_lsn: the archive must run on from it without a gap
    start_segment: str
    bytes: int
    seconds: float
    #: table -> batch keys the ledger recorded as applied to it when the backup started
    applied: dict[str, list[str]] = field(default_factory=dict)
    #: table -> its row count when the backup started
    chunks: dict[str, int] = field(default_factory=dict)
    #: the serving switch file as it stood (None: never written)
    switch: dict | None = None

    def describe(self) -> str:
        total = sum(self.chunks.values())
        return (f"{self.label}: {self.bytes / 1e6:.1f} MB, {total} chunks, WAL {self.start_lsn}"
                f"..{self.end_lsn} (timeline {self.timeline}), ended {self.ended_at}")  # fmt: skip


def backup_path(backup_dir: Path, label: str) -> Path:
    return Path(backup_dir) / "base" / label


def write_manifest(backup_dir: Path, manifest: BackupManifest) -> Path:
    path = backup_path(backup_dir, manifest.label) / MANIFEST
    write_atomic(path, json.dumps(asdict(manifest), indent=1) + "\n")
    return path


def backups(backup_dir: Path) -> list[BackupManifest]:
    """Every complete backup under backup_dir, oldest first (one without a manifest is not, nor
    one a prune set aside: a name starting with a dot)."""
    found = sorted(p for p in (Path(backup_dir) / "base").glob(f"*/{MANIFEST}")
                   if not p.parent.name.startswith("."))  # fmt: skip
    return [BackupManifest(**json.loads(path.read_text())) for path in found]


def chosen(backup_dir: Path, label: str | None) -> BackupManifest:
    """The backup named `label`, else the latest one."""
    found = backups(backup_dir)
    if not found:
        raise BackupError(
            f"no backup under {backup_dir}: nothing to restore from (`candlefire backup take` "
            "makes one)"
        )
    if label is None:
        return found[-1]
    for manifest in found:
        if manifest.label == label:
            return manifest
    raise BackupError(
        f"no backup {label!r} under {backup_dir} ({', '.join(m.label for m in found)})"
    )
