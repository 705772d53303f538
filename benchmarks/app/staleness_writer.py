"""The staleness window's writer: the pipeline's drops committed from a process of its own, each
commit stamped when its notification reaches a listener on a direct local connection.

In its own process the writer never holds up the collection that serves meanwhile (nor its
GIL), and `replace_papers` returning a few statements after its commit does not move the stamp.
Stamps are time.monotonic() (CLOCK_MONOTONIC: one clock for every process of the machine).
"""

from __future__ import annotations

import multiprocessing
import threading
import time

import psycopg
import pyarrow as pa
from psycopg import sql

from benchmarks.common.stores import open_store
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms.schema import change_channel

#: The longest a commit's notification may take: a failure, not a figure.
GIVE_UP_S = 60.0


class CommitClock:
    """When each content version was committed: its notification's arrival, stamped by a thread
    of its own."""

    def __init__(self, dsn: str, table: str) -> None:
        self._conn = psycopg.connect(dsn, autocommit=True)
        channel = sql.Identifier(change_channel(Names(table)))
        self._conn.execute(sql.SQL("LISTEN {}").format(channel))
        self._stamps: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commit-clock", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for notice in self._conn.notifies(timeout=0.05):
                self._stamps.setdefault(int(notice.payload), time.monotonic())

    def committed(self, version: int) -> float:
        """The stamp of `version`'s commit (waits for its notification)."""
        deadline = time.monotonic() + GIVE_UP_S
        while version not in self._stamps:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no notification of version {version}")
            time.sleep(0.0005)
        return self._stamps[version]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def marked(paper: pa.Table, marker: str) -> pa.Table:
    """The paper's rows, `marker` before each chunk's text."""
    index = paper.schema.get_field_index("document")
    documents = [f"{marker} {text}" for text in paper["document"].to_pylist()]
    return paper.set_column(index, "document", pa.array(documents, pa.string()))


def _serve(dsn: str, table: str, paper: pa.Table, pipe) -> None:
    """The child: for each marker received, the paper re-published with it; its commit's stamp
    sent back (an exception instead, if the write failed). None ends it."""
    store = open_store("pgvector", dsn, table)
    clock = CommitClock(dsn, table)
    version = sql.SQL("SELECT content_version FROM {m}").format(m=store.names.meta)
    try:
        while (marker := pipe.recv()) is not None:
            try:
                store.replace_papers(marked(paper, marker))
                pipe.send(clock.committed(store.conn.execute(version).fetchone()[0]))
            except Exception as exc:  # the parent raises it
                pipe.send(exc)
    finally:
        clock.close()
        store.close()


class WriterProcess:
    """The writer in a child process: `start(marker)` sends a drop, `committed()` its stamp."""

    def __init__(self, dsn: str, table: str, paper: pa.Table) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(dsn, table, paper, child),
                                        name="staleness-writer", daemon=True)  # fmt: skip
        self._process.start()
        child.close()

    def start(self, marker: str) -> None:
        self._pipe.send(marker)

    def committed(self) -> float:
        if not self._pipe.poll(GIVE_UP_S):
            raise RuntimeError("the writer process did not answer")
        stamp = self._pipe.recv()
        if isinstance(stamp, Exception):
            raise stamp
        return stamp

    def close(self) -> None:
        try:
            self._pipe.send(None)
        except OSError:  # the child is gone already
            pass
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._pipe.close()
