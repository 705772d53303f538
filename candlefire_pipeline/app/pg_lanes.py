"""The collection's connections to Postgres: a bounded set of lanes, one per call in flight.

A lane is one connection with what belongs to it: the session's search effort, the term caches'
per-connection state. A call takes a lane for its whole duration, so app threads sharing one
collection never wait on each other's round trips (up to CANDLEFIRE_PG_POOL_SIZE at once; a
call beyond waits CANDLEFIRE_PG_POOL_TIMEOUT_S for one to come back). Lanes open on demand and
close with the collection; a lane whose connection broke is dropped with every idle one (a
restarted server broke them all), and the call is asked again once on a new connection.
Every connection counts its round trips (each wait on the server) for the metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.connect import open_connection
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.backends.pg.terms.cache import CacheParams, TermCache
from candlefire_pipeline.redact import redact_dsn
from candlefire_pipeline.settings.app_client import AppClientSettings

log = logging.getLogger(__name__)

#: what the collection's connections call themselves in pg_stat_activity (and the proxy tests)
APP_NAME = "candlefire-app"


class PoolExhaustedError(BackendUnavailableError):
    """Every connection of the collection stayed busy for CANDLEFIRE_PG_POOL_TIMEOUT_S."""


class CountedConnection(psycopg.Connection):
    """A connection that counts its round trips, remembers the content version read after its
    last statement (None once another statement ran), and gives up a round trip the server does
    not answer within `deadline_s` (the network may hold packets without resetting: a kernel
    that still acknowledges them defeats keepalives): the connection is closed, the call fails."""

    round_trips = 0
    after = None
    _batched = False
    #: set by `bounded_connection_class`; None: wait as long as the server takes
    deadline_s: float | None = None

    def wait(self, gen, *args, **kwargs):
        if not self._batched:
            self.round_trips += 1
            self.after = None
        if self.deadline_s is None or len(args) > 1 or "timeout" in kwargs:
            return super().wait(gen, *args, **kwargs)
        try:
            return super().wait(gen, *args, timeout=self.deadline_s, **kwargs)
        except psycopg.errors._WaitTimeout:
            self.pgconn.finish()  # a half-read answer leaves the connection unusable
            raise psycopg.OperationalError(
                f"no answer from the server within {self.deadline_s:g} s (statement timeout + "
                "CANDLEFIRE_PG_DEAD_PEER_S): connection closed"
            ) from None

    @contextmanager
    def one_round_trip(self) -> Iterator[None]:
        """A pipeline whose statements count as the one round trip they cost."""
        self._batched = True
        try:
            with self.pipeline():
                yield
        finally:
            self._batched = False
        self.round_trips += 1


def bounded_connection_class(client: AppClientSettings) -> type[CountedConnection]:
    """CountedConnection giving up a round trip after the statement timeout plus the dead-peer
    bound (the server ends a slow statement itself; beyond that the network lost it)."""
    deadline = client.statement_timeout_ms / 1000 + client.dead_peer_s
    if client.statement_timeout_ms == 0:  # no statement timeout: a statement may run for ever
        deadline = None
    return type("BoundedConnection", (CountedConnection,), {"deadline_s": deadline})


class LaneStore(PgVectorBackend):
    """The pgvector store's read side on one counted connection."""

    def __init__(self, *args, connection_class: type[CountedConnection], **kwargs) -> None:
        self._connection_class = connection_class
        super().__init__(*args, **kwargs)

    def _open(self) -> psycopg.Connection:
        conn = open_connection(self._dsn, self._connection_class)
        self._session.forget()
        return conn

    def assume_model(self, model: tuple[str, int]) -> None:
        """The table's model, checked once by the collection: no catalog reads per lane."""
        self._ready = model


class Lane:
    """One connection of the collection and the term caches that read through it."""

    def __init__(self, dsn: str, table: str, ann: AnnParams, cache: CacheParams,
                 connection_class: type[CountedConnection]) -> None:  # fmt: skip
        # LIKE: the collection's $contains is case-sensitive whatever the writer's substring mode
        self.store = LaneStore(dsn, table, substring_mode="like", ann=ann, cache=cache,
                               connection_class=connection_class)  # fmt: skip
        #: keyword entries ranked over every holder (the document filter is exact here)
        self.exact = TermCache(self.store, replace(cache, keyword_walk="off"))
        self.exact.first_abstracts = True

    @property
    def conn(self) -> CountedConnection:
        return self.store.conn  # reconnects (and forgets the session's effort) when lost

    @property
    def broken(self) -> bool:
        conn = self.store._conn
        return conn.closed or conn.broken

    def round_trips(self) -> int:
        return self.store._conn.round_trips

    def close(self) -> None:
        try:
            self.store.close()
        except psycopg.Error:  # the use counts could not be flushed: the server is gone
            self.store._conn.close()


class Lanes:
    """At most `size` lanes, opened on demand; a call holds one for its duration."""

    def __init__(self, make: Callable[[], Lane], size: int, timeout: float, dsn: str) -> None:
        self._make, self._size, self._timeout = make, size, timeout
        self._where = redact_dsn(dsn)
        self._idle: list[Lane] = []
        self._opened = 0
        self._closed = False
        self._changed = threading.Condition()

    @property
    def opened(self) -> int:
        return self._opened

    @property
    def busy(self) -> int:
        with self._changed:
            return self._opened - len(self._idle)

    @contextmanager
    def lane(self) -> Iterator[Lane]:
        lane = self._take()
        try:
            yield lane
        finally:
            self._give(lane)

    def _take(self) -> Lane:
        deadline = time.monotonic() + self._timeout
        with self._changed:
            while True:
                if self._closed:
                    raise BackendUnavailableError("the collection is closed")
                if self._idle:
                    return self._idle.pop()
                if self._opened < self._size:
                    self._opened += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PoolExhaustedError(
                        f"all {self._size} connections to {self._where} stayed busy for "
                        f"{self._timeout:g} s (CANDLEFIRE_PG_POOL_SIZE, _POOL_TIMEOUT_S)"
                    )
                self._changed.wait(left)
        try:
            return self._make()
        except BaseException:
            with self._changed:
                self._opened -= 1
                self._changed.notify()
            raise

    def _give(self, lane: Lane) -> None:
        with self._changed:
            if self._closed or lane.broken:
                self._opened -= 1
                dropped = [lane]
            else:
                self._idle.append(lane)
                dropped = []
            self._changed.notify()
        for gone in dropped:
            gone.close()

    def drop_idle(self) -> int:
        """Close every idle lane (after a lost connection: a restarted server lost them all)."""
        with self._changed:
            dropped, self._idle = self._idle, []
            self._opened -= len(dropped)
            self._changed.notify_all()
        for lane in dropped:
            lane.close()
        return len(dropped)

    def close(self) -> None:
        with self._changed:
            self._closed = True
        self.drop_idle()
