"""The one record of which drop file versions were taken in, shared by every launcher.

The `papers` asset writes it when it ingests a drop (whoever launched the run: the sensor, the
CLI, the UI, a backfill) and `candlefire register-drops` writes it for drops it registers; the
drop sensor reads it and launches nothing for a drop whose current version is recorded. A drop
is identified by its fingerprint (name, size, mtime), so a changed file is new again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from candlefire_pipeline.corpus.drop_scan import DropFile
from candlefire_pipeline.fsutil import file_lock, write_atomic

RECORD_VERSION = 1


class DropRecordError(ValueError):
    """The record file exists but cannot be read as a drop record."""


def drop_file(path: Path) -> DropFile:
    """The drop's fingerprint as it is on disk now."""
    stat = Path(path).stat()
    return DropFile(Path(path).name, stat.st_size, stat.st_mtime_ns)


def _entries(path: Path) -> dict[str, dict]:
    """name -> {fingerprint, by, at}; DropRecordError when the file is not a drop record."""
    if not path.exists():
        return {}
    try:
        drops = json.loads(path.read_text(encoding="utf-8"))["drops"]
        for name, entry in drops.items():
            if not isinstance(name, str) or not isinstance(entry["fingerprint"], str):
                raise TypeError(f"entry {name!r} has no fingerprint string")
        return drops
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
        raise DropRecordError(f"{path} is not a drop record ({problem})") from None


def read_record(path: Path) -> dict[str, str]:
    """drop name -> fingerprint (DropFile.run_key) of the version last taken in; {} if none."""
    return {name: entry["fingerprint"] for name, entry in _entries(Path(path)).items()}


def record_drops(path: Path, drops: Iterable[DropFile], source: str) -> int:
    """Record these drop versions as taken in by `source`; returns how many entries changed."""
    drops = list(drops)
    if not drops:
        return 0
    path = Path(path)
    # read-modify-write between processes (parallel runs, the CLI) is serialized
    with file_lock(path.with_name(path.name + ".lock")):
        try:
            entries = _entries(path)
        except DropRecordError:
            entries = {}  # rebuilt rather than blocking every ingest: re-ingesting is idempotent
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        changed = 0
        for drop in drops:
            if entries.get(drop.name, {}).get("fingerprint") != drop.run_key:
                changed += 1
            entries[drop.name] = {"fingerprint": drop.run_key, "by": source, "at": at}
        payload = {"version": RECORD_VERSION, "drops": dict(sorted(entries.items()))}
        write_atomic(path, json.dumps(payload, indent=1) + "\n")
    return changed
