"""What content a pgvector table holds now, as one app process knows it without asking.

The writers' commits notify the table's change channel with its new content version
(backends/pg/terms/schema.py: a trigger on the meta row, so a statement that bypasses the store
notifies too). A watch thread LISTENs on its own connection and reads the version every third
of the staleness bound (the heartbeat). `current()` names the content the process may answer
from its copy (app/local_answers.py): the server, the table and the version, while the last
heartbeat was sent less than CANDLEFIRE_APP_STALENESS_MS ago; else None and every call asks
Postgres. So a reader sees another process's commit once its notification arrives (a one-way
network delay), and, if notifications are lost (a standby cannot LISTEN, a silent network),
within the staleness bound. A lost connection, a restarted server or a re-created table makes
the copy unusable until the watch has read the version again on a new connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.connect import connect, one_line
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms.schema import change_channel

log = logging.getLogger(__name__)

#: seconds between reconnection attempts of a watch that lost its connection, doubling to MAX
RETRY_SECONDS, MAX_RETRY_SECONDS = 0.05, 5.0
#: the longest a closing collection waits for its watch thread to notice
STOP_POLL_SECONDS = 0.05


class Epoch(NamedTuple):
    """The content a statement saw: which server (its start), which table, which version."""

    server: float
    table: int
    version: int

    def same_place(self, other: Epoch) -> bool:
        return self.server == other.server and self.table == other.table


def version_statement(names: Names) -> bytes:
    """One row: the table's content version and what identifies the server and the table."""
    return (
        sql.SQL(
            "SELECT content_version, extract(epoch FROM pg_postmaster_start_time())::float8, "
            "to_regclass({t})::oid::bigint FROM {m}"
        )
        .format(t=sql.Literal(names.ident().as_string(None)), m=names.meta)
        .as_bytes(None)
    )


def epoch_of(row) -> Epoch | None:
    return None if row is None or row[2] is None else Epoch(float(row[1]), int(row[2]), int(row[0]))


class ContentWatch:
    """The table's content as this process knows it, proven at most `staleness_s` ago."""

    def __init__(
        self,
        dsn: str,
        names: Names,
        staleness_s: float,
        on_move: Callable[[], None],
        connection_class: type[psycopg.Connection] = psycopg.Connection,
    ) -> None:
        self._dsn, self._names, self.staleness = dsn, names, staleness_s
        self._connection_class = connection_class
        self._statement = version_statement(names)
        self._channel = change_channel(names)
        #: told when the copy must be forgotten (a new version, server or table)
        self._on_move = on_move
        self._lock = threading.Lock()
        self._epoch: Epoch | None = None
        self._proven_at = float("-inf")  # when the last heartbeat that read the epoch was sent
        self.listening = False
        self.notified = 0  # notifications received
        self.lost = 0  # connections lost
        self._conn: psycopg.Connection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="candlefire-watch", daemon=True)
        self._thread.start()

    # what readers ask --------------------------------------------------------------------------
    def current(self) -> Epoch | None:
        """The content a copied answer may be served for now, or None (ask Postgres)."""
        with self._lock:
            if self._epoch is None or time.monotonic() - self._proven_at >= self.staleness:
                return None
            return self._epoch

    def saw(self, seen: Epoch | None) -> None:
        """A call read `seen` with its answer: a newer version moves the copy on at once; another
        server or table (a failover, a re-created table) suspends the copy until re-proven."""
        if seen is None:
            return
        with self._lock:
            known = self._epoch
            if known is None or seen == known:
                return
            if not seen.same_place(known):
                self._epoch = None
            elif seen.version > known.version:
                self._epoch = seen
            else:
                return
        self._on_move()

    def wait_for(self, version: int, timeout: float) -> bool:
        """Whether the watch knows `version` (or a later one) within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            known = self.current()
            if known is not None and known.version >= version:
                return True
            time.sleep(0.002)
        return False

    # the watch thread ----------------------------------------------------------------------
    def _run(self) -> None:
        delay = RETRY_SECONDS
        while not self._stop.is_set():
            try:
                self._conn = connect(self._dsn, connection_class=self._connection_class)
                self._listen()
                delay = RETRY_SECONDS
                self._beat()
            except psycopg.Error as exc:
                self._forget(f"lost its connection ({one_line(str(exc))[:200]})")
            except Exception as exc:  # the thread must outlive any surprise
                self._forget(f"failed ({type(exc).__name__}: {one_line(str(exc))[:200]})")
            finally:
                self._close_conn()
            self._stop.wait(delay)
            delay = min(delay * 2, MAX_RETRY_SECONDS)

    def _listen(self) -> None:
        try:
            self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self.listening = True
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.ReadOnlySqlTransaction):
            # a hot standby cannot LISTEN: the heartbeat alone bounds what a reader may miss
            self.listening = False
            log.info("the watch cannot LISTEN here (a standby?): changes are seen within "
                     "%.0f ms by the heartbeat", self.staleness * 1000)  # fmt: skip

    def _beat(self) -> None:
        """Read the version every third of the bound; take notifications in between (in short
        waits, so a closing collection is not kept waiting)."""
        interval = self.staleness / 3
        while not self._stop.is_set():
            sent = time.monotonic()
            self._prove(epoch_of(self._conn.execute(self._statement).fetchone()), sent)
            while not self._stop.is_set() and (left := sent + interval - time.monotonic()) > 0:
                for notice in self._conn.notifies(timeout=min(left, STOP_POLL_SECONDS)):
                    self._notified(notice.payload)

    def _prove(self, epoch: Epoch | None, sent: float) -> None:
        if epoch is None:
            raise RuntimeError(f"{self._names.table} is gone")
        with self._lock:
            known = self._epoch
            # a notification (or a call) may already have carried a newer version of the same
            # table: keep it; anything else read here is what the table holds now
            moved = not (known is not None and known.same_place(epoch)
                         and known.version >= epoch.version)  # fmt: skip
            if moved:
                self._epoch = epoch
            self._proven_at = max(self._proven_at, sent)
        if moved:
            self._on_move()

    def _notified(self, payload: str) -> None:
        self.notified += 1
        try:
            version = int(payload)
        except ValueError:
            return
        with self._lock:
            known = self._epoch
            if known is None or version <= known.version:
                return
            self._epoch = known._replace(version=version)
        self._on_move()

    def _forget(self, why: str) -> None:
        with self._lock:
            had = self._epoch is not None
            self._epoch, self._proven_at = None, float("-inf")
        self.lost += 1
        if had:
            log.warning("the change watch of %s %s: every call asks Postgres until it is back",
                        self._names.table, why)  # fmt: skip
            self._on_move()

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        # a heartbeat in flight on a dead network ends within the connection's own timeouts
        self._thread.join(timeout=30.0)
