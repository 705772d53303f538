"""Qdrant local mode: one shared client per folder in a process, one process at a time."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.qdrant import local as qdrant_local
from candlefire_pipeline.backends.qdrant.backend import QdrantBackend
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from candlefire_pipeline.backends.qdrant.backend import QdrantBackend\n"
    "store = QdrantBackend(path=sys.argv[1])\n"
    "print('holding', flush=True)\n"
    "while not Path(sys.argv[2]).exists():\n"
    "    time.sleep(0.05)\n"
    "print('releasing', flush=True)\n"
    "store.close()\n"
    "print('released', flush=True)\n"
)


@contextmanager
def holder(path: Path, log: Path, release: Path) -> Iterator:
    """Another process holding the local-mode folder until `release` exists, then closing it."""
    proc = procs.spawn([sys.executable, "-c", HOLDER, path, release], log_path=log)
    try:
        procs.wait_until(
            lambda: "holding" in log.read_text(), proc=proc, log_path=log, what="holder"
        )
        yield proc
    finally:
        procs.stop_group(proc, first=signal.SIGKILL)


class _RefusalsSeen:
    """qdrant_local's fcntl, telling when a non-blocking lock attempt met the holder's lock."""

    def __init__(self) -> None:
        self.refused = threading.Event()

    def __getattr__(self, name: str):
        return getattr(fcntl, name)

    def flock(self, fd: int, operation: int) -> None:
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            self.refused.set()
            raise


def rows(n: int = 3):
    return make_rows([chunk(str(i)) for i in range(n)], unit_vectors(n, 8))


def test_backends_on_one_folder_share_one_client_until_the_last_close(tmp_path):
    first = QdrantBackend(path=tmp_path / "q")
    second = QdrantBackend(path=tmp_path / "q")
    assert first._client is second._client
    first.replace_papers(rows())
    first.close()
    assert second.count() == 3  # the shared client stays open for the other backend
    second.close()
    assert (tmp_path / "q").resolve() not in qdrant_local._HANDLES
    third = QdrantBackend(path=tmp_path / "q")  # reopened from disk
    assert third.count() == 3 and third._client is not second._client
    third.close()


def test_a_second_process_gets_a_clear_error_naming_the_holder(tmp_path):
    path = tmp_path / "q"
    with holder(path, tmp_path / "holder.log", release=tmp_path / "never") as proc:
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError, match=rf"in use by pid {proc.pid} \(python"):
            QdrantBackend(path=path, lock_timeout=0.5)
        assert time.monotonic() - started >= 0.5  # it waited before giving up
    store = QdrantBackend(path=path, lock_timeout=0.5)  # the holder is gone: free again
    assert store.count() == 0
    store.close()


def test_a_waiting_process_gets_the_folder_once_the_holder_closes(tmp_path, monkeypatch):
    log, release = tmp_path / "holder.log", tmp_path / "release"
    seen = _RefusalsSeen()
    monkeypatch.setattr(qdrant_local, "fcntl", seen)
    opened: list = []

    def wait_for_the_folder() -> None:
        opened.append(QdrantBackend(path=tmp_path / "q", lock_timeout=120))

    with holder(tmp_path / "q", log, release):
        waiter = threading.Thread(target=wait_for_the_folder)
        waiter.start()
        try:
            # it met the holder's lock and is waiting (not merely started) before the holder lets
            # go, whatever the machine's schedule: the overlap is made, not timed
            assert seen.refused.wait(procs.STARTUP_LIMIT_S), "the open never met the holder"
            assert waiter.is_alive() and not opened
        finally:
            release.touch()
            waiter.join(procs.STARTUP_LIMIT_S)
        assert not waiter.is_alive() and len(opened) == 1, "the waiting open never got the folder"
        # it queued behind the holder instead of failing: the holder was already letting go
        assert "releasing" in log.read_text()
    store = opened[0]
    store.replace_papers(rows())
    assert store.count() == 3
    store.close()


def test_local_storage_is_tuned_to_wal(tmp_path):
    store = QdrantBackend(path=tmp_path / "q", collection="tuned")
    store.replace_papers(rows())
    store.close()
    db = tmp_path / "q" / "collection" / "tuned" / "storage.sqlite"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM points").fetchone() == (3,)


def test_a_forked_child_opens_its_own_client_after_the_parent_closes(tmp_path):
    parent = QdrantBackend(path=tmp_path / "q")
    parent.replace_papers(rows())
    pid = os.fork()
    if pid == 0:  # the child: its inherited registry entry is the parent's, not its own
        code = 1
        try:
            child = QdrantBackend(path=tmp_path / "q", lock_timeout=60)
            code = 0 if child._client is not parent._client and child.count() == 3 else 2
            child.close()
        finally:
            os._exit(code)
    parent.close()  # the child was waiting for exactly this
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
