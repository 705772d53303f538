"""Qdrant local mode: one shared client per folder in a process, one process at a time."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
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
    "from candlefire_pipeline.backends.qdrant.backend import QdrantBackend\n"
    "store = QdrantBackend(path=sys.argv[1])\n"
    "print('holding', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "store.close()\n"
    "print('released', flush=True)\n"
)


@contextmanager
def holder(path: Path, log: Path, seconds: float) -> Iterator:
    """Another process holding the local-mode folder for `seconds`, then closing it."""
    proc = procs.spawn([sys.executable, "-c", HOLDER, path, str(seconds)], log_path=log)
    try:
        procs.wait_until(
            lambda: "holding" in log.read_text(), proc=proc, log_path=log, what="holder"
        )
        yield proc
    finally:
        procs.stop_group(proc, first=signal.SIGKILL)


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
    with holder(path, tmp_path / "holder.log", seconds=600) as proc:
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError, match=rf"in use by pid {proc.pid} \(python"):
            QdrantBackend(path=path, lock_timeout=0.5)
        assert time.monotonic() - started >= 0.5  # it waited before giving up
    store = QdrantBackend(path=path, lock_timeout=0.5)  # the holder is gone: free again
    assert store.count() == 0
    store.close()


def test_a_waiting_process_gets_the_folder_once_the_holder_closes(tmp_path):
    log = tmp_path / "holder.log"
    with holder(tmp_path / "q", log, seconds=1.0):
        store = QdrantBackend(path=tmp_path / "q", lock_timeout=120)
        assert "released" in log.read_text()  # it queued behind the holder instead of failing
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
