"""Which drop files are complete and not yet ingested (the drop sensor's pure core)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from candlefire_pipeline.corpus.drops import SUPPORTED_SUFFIXES

#: Names a writer uses while a file is still being written.
IN_PROGRESS_SUFFIXES = (".part", ".tmp", ".partial", ".crdownload")


@dataclass(frozen=True)
class DropFile:
    name: str
    size: int
    mtime_ns: int

    @property
    def run_key(self) -> str:
        """Changes when the file is replaced, so a replaced drop runs again."""
        return f"{self.name}:{self.size}:{self.mtime_ns}"


@dataclass
class DropCursor:
    """seen: name -> run key already requested; pending: name -> [size, mtime] last tick."""

    seen: dict[str, str] = field(default_factory=dict)
    pending: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: str | None) -> DropCursor:
        if not raw:
            return cls()
        data = json.loads(raw)
        return cls(seen=dict(data.get("seen", {})), pending=dict(data.get("pending", {})))

    def dump(self) -> str:
        return json.dumps({"seen": self.seen, "pending": self.pending}, sort_keys=True)


def scan_drops(drops_dir: Path) -> list[DropFile]:
    """Drop files in name order, without hidden or in-progress files."""
    if not drops_dir.is_dir():
        return []
    found = []
    for path in sorted(drops_dir.iterdir()):
        name = path.name
        if name.startswith(".") or name.endswith(IN_PROGRESS_SUFFIXES) or not path.is_file():
            continue
        if name.endswith(SUPPORTED_SUFFIXES):
            stat = path.stat()
            found.append(DropFile(name, stat.st_size, stat.st_mtime_ns))
    return found


def ready_drops(
    files: list[DropFile], cursor: DropCursor, taken_in: Mapping[str, str] | None = None
) -> tuple[list[DropFile], DropCursor]:
    """Files unchanged since the previous tick, not yet requested and not taken in (the shared
    drop record: name -> fingerprint); the advanced cursor."""
    ready: list[DropFile] = []
    taken_in = taken_in or {}
    nxt = DropCursor(seen=dict(cursor.seen), pending={})
    for drop in files:
        if drop.run_key in (cursor.seen.get(drop.name), taken_in.get(drop.name)):
            continue
        if cursor.pending.get(drop.name) == [drop.size, drop.mtime_ns]:
            ready.append(drop)
            nxt.seen[drop.name] = drop.run_key
        else:
            nxt.pending[drop.name] = [drop.size, drop.mtime_ns]
    return ready, nxt
