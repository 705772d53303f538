"""Qdrant local mode (`QdrantClient(path=...)`): one shared client per folder per process.

Local mode takes an exclusive file lock on its folder, so a second client on the same folder
fails -- even in the same process. Backends opened on one folder in one process therefore share
one client (reference-counted; the last close releases the folder). Across processes a
candlefire lock file is taken first and waited for up to a timeout, so steps of the
multiprocess executor and the CLI queue instead of failing, and a holder that keeps the folder
too long is named (pid and command) in the error.

Local mode persists every point in its own SQLite commit; with the default rollback journal
and synchronous=FULL that is one fsync per point (measured: ~60 rows/s). WAL with
synchronous=NORMAL keeps every commit atomic and survives a killed process (only a power cut
may lose the last commits, never corrupt the file) and writes ~20x faster.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from qdrant_client import QdrantClient

from candlefire_pipeline.backends.common import BackendUnavailableError

log = logging.getLogger(__name__)

LOCK_FILE = "candlefire.lock"
POLL_SECONDS = 0.2


@dataclass
class LocalHandle:
    """A local-mode client shared by every backend of this process on one folder."""

    path: Path
    client: QdrantClient
    lock_fd: int
    refs: int = 0
    #: A forked child inherits the registry but must not use its parent's client or lock.
    pid: int = field(default_factory=os.getpid)
    #: Local mode is plain Python over shared dicts: one operation at a time.
    guard: threading.RLock = field(default_factory=threading.RLock)


_HANDLES: dict[Path, LocalHandle] = {}
#: Handles a forked child inherited: kept alive, since closing them would unlock the parent's.
_INHERITED: list[LocalHandle] = []
_REGISTRY = threading.Lock()


def acquire(path: Path, lock_timeout: float) -> LocalHandle:
    """The shared client of `path`, opening it (and taking the folder) on first use."""
    path = Path(path).resolve()
    with _REGISTRY:
        handle = _HANDLES.get(path)
        if handle is not None and handle.pid != os.getpid():
            _INHERITED.append(handle)  # inherited through fork: the parent's, never used here
            handle = None
        if handle is None:
            handle = _open(path, lock_timeout)
            _HANDLES[path] = handle
        handle.refs += 1
        return handle


def release(handle: LocalHandle) -> None:
    """Drop one reference; the last one closes the client and frees the folder."""
    with _REGISTRY:
        handle.refs -= 1
        if handle.refs > 0:
            return
        _HANDLES.pop(handle.path, None)
        try:
            handle.client.close()
        finally:
            # unlock explicitly: a forked child's copy of the fd would otherwise keep the lock
            fcntl.flock(handle.lock_fd, fcntl.LOCK_UN)
            os.close(handle.lock_fd)


def tune_storage(client: QdrantClient) -> None:
    """WAL + synchronous=NORMAL on every collection's SQLite file (see the module docstring)."""
    collections = getattr(getattr(client, "_client", None), "collections", {}) or {}
    for collection in collections.values():
        conn = getattr(getattr(collection, "storage", None), "storage", None)
        if isinstance(conn, sqlite3.Connection):
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")


def _open(path: Path, lock_timeout: float) -> LocalHandle:
    path.mkdir(parents=True, exist_ok=True)
    fd = _take_folder(path, lock_timeout)
    try:
        with warnings.catch_warnings():
            # "not recommended for more than 20,000 points": docs/DEPLOY.md says when to use
            # a server; repeating it on every open helps no one.
            warnings.simplefilter("ignore", UserWarning)
            client = QdrantClient(path=str(path))
    except RuntimeError as exc:
        os.close(fd)
        raise BackendUnavailableError(
            f"Qdrant local storage {path} is held by another Qdrant client ({exc}); local mode "
            "allows one process at a time: stop it, or run a Qdrant server (CANDLEFIRE_QDRANT_URL)"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    tune_storage(client)
    log.info("opened Qdrant local storage %s", path)
    return LocalHandle(path=path, client=client, lock_fd=fd)


def _take_folder(path: Path, lock_timeout: float) -> int:
    """An fd holding the exclusive candlefire lock of `path`, waiting up to lock_timeout s."""
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(0.0, lock_timeout)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder(fd)
                os.close(fd)
                raise BackendUnavailableError(
                    f"Qdrant local storage {path} is in use by {holder} (waited "
                    f"{lock_timeout:g} s); local mode allows one process at a time: wait for it, "
                    "raise CANDLEFIRE_QDRANT_LOCK_TIMEOUT, or run a Qdrant server "
                    "(CANDLEFIRE_QDRANT_URL) for concurrent access"
                ) from None
            time.sleep(POLL_SECONDS)
    os.ftruncate(fd, 0)
    argv = [Path(sys.argv[0]).name, *sys.argv[1:3]] if sys.argv else []
    command = " ".join([Path(sys.executable).name, *argv])
    os.pwrite(fd, f"{os.getpid()} {command[:120]}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    if not text:
        return "another process"
    pid, _, command = text.partition(" ")
    return f"pid {pid} ({command or 'unknown command'})"
