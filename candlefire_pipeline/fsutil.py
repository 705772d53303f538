"""File helpers every layer shares: atomic writes, a file lock, reading possibly gzipped drops."""

from __future__ import annotations

import fcntl
import gzip
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write `data` to `<path>.tmp`, then rename: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) across processes for the block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_maybe_gzip(path: Path) -> BinaryIO:
    """A binary stream of the file's content, decompressed when its name ends in `.gz`."""
    path = Path(path)
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def is_hidden(path: Path) -> bool:
    """A dot-name: a folder still being written (`.<name>.tmp-<pid>`) or a lock, never a batch."""
    return Path(path).name.startswith(".")


def temporary_for(target: Path) -> Path:
    """This process's folder to build `target` in before one rename puts it in place."""
    return target.with_name(f".{target.name}.tmp-{os.getpid()}")


def remove_dead_temporaries(target: Path) -> list[Path]:
    """Remove the temporary folders of `target` whose process is gone (a killed run's, which a
    reader must never see and which would hold their disk forever); the removed ones."""
    removed = []
    for stale in Path(target).parent.glob(f".{Path(target).name}.tmp-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
