"""Retention of the backup folder: the newest `keep` base backups and the WAL from the oldest
kept one's start on; every older base and segment removed. Without it the archive grows by
every byte ever written (2.2 GB after ten drops at 62k) until its disk fills and archiving stops,
and then WAL piles up under data/pg.

A segment goes when it logically precedes the oldest kept backup's start segment, whatever its
timeline (pg_archivecleanup's rule); timeline history files stay (a restore reads them), and so
do files the archive command is still copying in (`.part`) and anything not named like WAL.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from candlefire_pipeline.operations.backup.archive import segment_number, wal_dir
from candlefire_pipeline.operations.backup.manifest import BackupManifest, backup_path, backups
from candlefire_pipeline.operations.backup.tools import BackupError, tree_bytes

#: The prefix a base being removed is renamed to (never a backup label: those are timestamps).
SET_ASIDE = ".pruned-"
#: A finished archive file named by a segment: the segment itself, a `.partial` one (the last
#: segment of a timeline a restore ended) or a `.backup` label file (`<segment>.<offset>.backup`).
ARCHIVED = re.compile(r"([0-9A-F]{24})(?:\.partial|\.[0-9A-F]{8}\.backup)?")


@dataclass
class PrunePlan:
    kept: list[BackupManifest]
    bases: list[BackupManifest] = field(default_factory=list)
    segments: list[Path] = field(default_factory=list)
    bytes: int = 0
    #: base folders without a manifest (a take still running, or one killed): never touched
    unfinished: list[str] = field(default_factory=list)
    #: bases a killed prune had set aside: removed with the rest
    leftovers: list[Path] = field(default_factory=list)

    def lines(self, applied: bool) -> list[str]:
        verb = "removed" if applied else "would remove"
        oldest = self.kept[0]
        labels = ", ".join(m.label for m in self.bases) or "none"
        lines = [
            f"{verb} {len(self.bases)} backup(s) ({labels}) and {len(self.segments)} WAL "
            f"file(s): {self.bytes / 1e6:.1f} MB",
            f"kept {len(self.kept)} backup(s); a restore can reach any point from "
            f"{oldest.ended_at} (backup {oldest.label}, WAL {oldest.end_lsn}) on",
        ]
        if self.unfinished:
            lines.append(f"left alone (no manifest: a take running or killed): "
                         f"{', '.join(self.unfinished)}")  # fmt: skip
        if not applied and (self.bases or self.segments):
            lines.append("nothing was removed: run again with --apply")
        return lines


def plan(backup_dir: Path, keep: int) -> PrunePlan:
    """What `prune(backup_dir, keep)` removes; nothing is touched."""
    if keep < 1:
        raise BackupError(f"--keep {keep}: at least one backup must stay")
    found = backups(backup_dir)
    if not found:
        raise BackupError(
            f"no backup under {backup_dir}: nothing to prune (the archived WAL is kept until a "
            "backup it belongs to exists; `candlefire backup take` makes one)"
        )
    result = PrunePlan(kept=found[-keep:], bases=found[:-keep])
    complete = {m.label for m in found}
    base = Path(backup_dir) / "base"
    folders = sorted(base.iterdir())
    result.leftovers = [p for p in folders if p.name.startswith(SET_ASIDE)]
    result.unfinished = [p.name for p in folders
                         if p.name not in complete and p not in result.leftovers]  # fmt: skip
    start = segment_number(result.kept[0].start_segment)
    folder = wal_dir(backup_dir)
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    for path in files:
        named = ARCHIVED.fullmatch(path.name)
        if named and segment_number(named.group(1)) < start:
            result.segments.append(path)
    bases = [backup_path(backup_dir, m.label) for m in result.bases] + result.leftovers
    result.bytes = sum(p.stat().st_size for p in result.segments) + sum(map(tree_bytes, bases))
    return result


def prune(backup_dir: Path, keep: int, apply: bool = False) -> PrunePlan:
    """Remove what plan() names when `apply`: each base first renamed aside in one step, so a
    prune killed midway leaves complete backups and set-aside ones a re-run removes."""
    result = plan(backup_dir, keep)
    if apply:
        for manifest in result.bases:
            folder = backup_path(backup_dir, manifest.label)
            aside = folder.with_name(SET_ASIDE + manifest.label)
            folder.rename(aside)
            result.leftovers.append(aside)
        for folder in result.leftovers:
            shutil.rmtree(folder)
        for path in result.segments:
            path.unlink(missing_ok=True)
    return result
