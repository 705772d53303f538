"""The collection's calls answered by a pgvector chunks table across a network.

Each call takes a lane (app/pg_lanes.py: its own connection, so threads never wait on each
other's round trips) and is answered on it (app/pg_answers.py: the term cache's kept entries,
else SQL). With the change watch on (CANDLEFIRE_APP_STALENESS_MS > 0, the default), a call's
answer is also copied into the process (app/local_answers.py) for the content version the watch
proves, and served from there, with no round trip, until a write moves that version
(app/watch.py): a kept answer costs one round trip the first time, none after. The version
is read in the same round trip as the answer (a pipeline), so a copy is only ever kept for the
content its answer was read from. With the bound at 0 every call asks Postgres, as before.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable

import numpy as np
import psycopg

from candlefire_pipeline.app import pg_answers
from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.local_answers import LocalAnswers
from candlefire_pipeline.app.model_check import embed_checked, pg_sample
from candlefire_pipeline.app.pg_lanes import (
    APP_NAME,
    Lane,
    Lanes,
    bounded_connection_class,
)
from candlefire_pipeline.app.results import get_result, query_result
from candlefire_pipeline.app.watch import ContentWatch, Epoch, epoch_of, version_statement
from candlefire_pipeline.backends.common import BackendUnavailableError, check_dim
from candlefire_pipeline.backends.pg.connect import one_line
from candlefire_pipeline.backends.pg.layout import AnnParams, Layout
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline.redact import redact_dsn
from candlefire_pipeline.settings.app_client import AppClientSettings

log = logging.getLogger(__name__)

COUNT_KEY = ("count",)


class PgCollectionStore:
    """Reads of one chunks table (a generation's), on a bounded set of connections."""

    name = "pgvector"

    def __init__(self, dsn: str, table: str, ann: AnnParams, embedder,
                 cache: CacheParams | None = None,
                 client: AppClientSettings | None = None) -> None:  # fmt: skip
        client = client or AppClientSettings()
        self.ann, self.layout, self.embedder = ann, Layout.of(ann), embedder
        self.names = Names(table)
        self._cache = cache or CacheParams()
        self._where = redact_dsn(dsn)
        self._dsn = client.client_dsn(dsn, APP_NAME)
        self._connection_class = bounded_connection_class(client)
        self._lanes = Lanes(self._new_lane, client.pool_size, client.pool_timeout_s, dsn)
        #: calls by how they were answered: "local" (the process copy), "kept" (an entry
        #: read), "kept after computing" (a miss computed and kept, then read), ", walked" (an
        #: abstract holder found along the seq index), "sql" (every other shape)
        self.answered: Counter[str] = Counter()
        self.round_trips = 0  # every call's, summed
        self._noting = threading.Lock()
        #: the last call of each thread: (how it was answered, its round trips)
        self.last = threading.local()
        self.sql = pg_answers.Statements(self.names)
        self._version = version_statement(self.names)
        self.model: tuple[str, int] | None = None
        self.local: LocalAnswers | None = None
        self.watch: ContentWatch | None = None
        try:
            with self._lanes.lane() as lane:
                self.model, self.seq_index = pg_answers.check_table(lane.conn, self.names,
                                                                    self.layout)  # fmt: skip
                lane.store.assume_model(self.model)
            if client.watched:
                self.local = LocalAnswers(client.local_mb * 2**20)
                watch_dsn = client.client_dsn(dsn, f"{APP_NAME}-watch")
                self.watch = ContentWatch(watch_dsn, self.names, client.staleness_ms / 1000,
                                          self.local.clear, self._connection_class)  # fmt: skip
        except BaseException:
            self.close()
            raise

    def _new_lane(self) -> Lane:
        lane = Lane(self._dsn, self.names.table, self.ann, self._cache, self._connection_class)
        if self.model is not None:
            lane.store.assume_model(self.model)
        return lane

    @property
    def lanes(self) -> Lanes:
        return self._lanes

    # the calls -------------------------------------------------------------------------------
    def embed(self, texts: tuple[str, ...]) -> np.ndarray:
        """The texts' query vectors (one embedder call), from the model the table was built with
        (app/model_check.py: the embedder's recorded id, or the app's function checked once
        against the table's first stored chunks). Never called while this thread holds a lane."""

        def stored(k: int):
            with self._lanes.lane() as lane:
                return pg_sample(lane.conn, self.names, k)

        where = f"pgvector table {self.names.table!r}"
        return embed_checked(self.embedder, where, self.model, stored, texts)

    def count(self) -> int:
        """The row count: re-counted only when the content version moved (one round trip)."""
        return self._answer(COUNT_KEY, lambda lane, fetch: pg_answers.count(self, lane, fetch))

    def get(self, call: GetCall) -> dict:
        rows = self._answer(_get_key(call), lambda lane, fetch: pg_answers.get(self, lane, fetch,
                                                                                call))  # fmt: skip
        return get_result(rows, call.include)

    def query(self, call: QueryCall, vectors: np.ndarray | Callable[[], np.ndarray]) -> dict:
        """A query; `vectors` may be a function giving them, asked only when Postgres is (and
        before a lane is taken: embedding may read the store to check the model)."""
        made: list[np.ndarray] = []

        def embedded() -> None:
            made.append(vectors() if callable(vectors) else vectors)
            check_dim(self.model, made[0].shape[1])

        def answer(lane: Lane, fetch) -> list:
            return pg_answers.query(self, lane, fetch, call, made[0])

        return query_result(self._answer(_query_key(call), answer, embedded), call.include)

    # how a call is answered ------------------------------------------------------------------
    def _answer(self, key: Hashable, compute, before=None):
        """compute(lane, fetch), unless the process copy holds the answer; `before()` runs
        first when Postgres is asked, on no lane."""
        self.last.how, self.last.round_trips = None, 0
        epoch = self.watch.current() if self.watch is not None else None
        if epoch is not None:
            found = self.local.get(epoch, key)
            if found is not None:
                self.note("local", 0)
                return found
        if before is not None:
            before()
        value, seen = self._on_a_lane(compute)
        if epoch is not None and seen == epoch:
            self.local.put(epoch, key, value)
        if self.watch is not None:
            self.watch.saw(seen)
        return value

    def _on_a_lane(self, compute) -> tuple[object, Epoch | None]:
        """compute(lane, fetch) on a lane, and the content version read after its last
        statement; a connection found broken (a restarted server) is replaced and the call asked
        once more; a failure is one line naming the server."""
        for attempt in (1, 2):
            lane = None
            try:
                with self._lanes.lane() as lane:
                    before = lane.conn.round_trips
                    value = compute(lane, self._fetcher(lane))
                    seen = self._seen(lane) if self.watch is not None else None
                    self._count_trips(lane.conn.round_trips - before)
                    return value, seen
            except psycopg.OperationalError as exc:
                cancelled = isinstance(exc, psycopg.errors.QueryCanceled)
                if attempt == 1 and lane is not None and lane.broken and not cancelled:
                    dropped = self._lanes.drop_idle()
                    log.warning("lost the connection to %s (%s); asking again on a new one "
                                "(%d idle dropped)", self._where, one_line(str(exc))[:200],
                                dropped)  # fmt: skip
                    continue
                raise BackendUnavailableError(
                    f"pgvector at {self._where} ({self.names.table}) failed: "
                    f"{one_line(str(exc))[:300]}"
                ) from None
        raise AssertionError("unreachable")

    def _fetcher(self, lane: Lane):
        """Runs one statement and returns its rows; with the watch on, the content version is
        read after it in the same round trip (a pipeline)."""
        conn = lane.conn

        def fetch(statement, params=None) -> list[tuple]:
            if self.watch is None:
                return conn.execute(statement, params).fetchall()
            with conn.one_round_trip():
                rows = conn.execute(statement, params)
                version = conn.execute(self._version)
            found = rows.fetchall() if rows.description is not None else []
            conn.after = epoch_of(version.fetchone())
            return found

        return fetch

    def _seen(self, lane: Lane) -> Epoch | None:
        after = lane.conn.after
        if after is None:  # the call's last statement was not a fetch (a computation)
            after = epoch_of(lane.conn.execute(self._version).fetchone())
        return after

    def note(self, how: str, trips: int | None = None) -> None:
        with self._noting:
            self.answered[how] += 1
        self.last.how = how
        if trips is not None:
            self.last.round_trips = trips

    def _count_trips(self, trips: int) -> None:
        with self._noting:
            self.round_trips += trips
        self.last.round_trips = trips

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        self._lanes.close()


def _get_key(call: GetCall) -> tuple:
    return ("get", call.ids, call.where, call.where_document, call.limit, call.offset,
            "embeddings" in call.include)  # fmt: skip


def _query_key(call: QueryCall) -> tuple:
    asked = call.texts if call.texts is not None else (call.vectors.shape,
                                                       call.vectors.tobytes())  # fmt: skip
    return ("query", asked, call.n_results, call.where, call.where_document,
            "embeddings" in call.include)  # fmt: skip


#: the name test_term_calls.py reads
_count_statements = pg_answers.count_statements
