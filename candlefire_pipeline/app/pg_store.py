"""The collection's calls answered by a pgvector chunks table (app/pg_sql.py holds the SQL).

`get` returns rows in insertion order (the table's `seq`, which follows Chroma's rule). `query`
ranks by cosine distance, equal distances in insertion order: exactly (every matching row
ranked) when the table is at most CANDLEFIRE_PG_FULL_SCAN_ROWS rows or a document filter
narrows it (its matches collected through the trigram index), else through the HNSW index with
the semantic stage's effort and pgvector's iterative scan; a query vector that gets fewer than
n rows from the walk (a selective filter) is asked again exactly, so a list is short only when
fewer rows match. Works with the read-only serving role: it only reads.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.pg_sql import (
    ROW_WIDTH,
    conjunction,
    document_query_statement,
    filter_sql,
    get_statement,
    query_statement,
)
from candlefire_pipeline.app.results import Row, get_result, query_result
from candlefire_pipeline.backends.chroma.metadata import META_KEYS
from candlefire_pipeline.backends.common import BackendUnavailableError, check_dim
from candlefire_pipeline.backends.pg.connect import open_connection
from candlefire_pipeline.backends.pg.insertion_order import has_insertion_order
from candlefire_pipeline.backends.pg.layout import (
    AnnParams,
    Layout,
    RowEstimate,
    SessionSettings,
    check_layout,
    stage_effort,
    stored_layout,
)
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.redact import redact_dsn

log = logging.getLogger(__name__)


class PgCollectionStore:
    """Reads of one chunks table (a generation's) through one connection, one call at a time."""

    name = "pgvector"

    def __init__(self, dsn: str, table: str, ann: AnnParams, embedder) -> None:
        self.names, self.ann, self.layout = Names(table), ann, Layout.of(ann)
        self.embedder = embedder
        self._lock = threading.Lock()  # a call's effort and its statements go together
        self._session, self._rows = SessionSettings(), RowEstimate()
        self._dsn = dsn
        self._conn = open_connection(dsn)
        try:
            self.model = self._check_table()
        except BaseException:
            self._conn.close()
            raise

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn.closed or self._conn.broken:
            log.warning("Postgres connection lost; reconnecting to %s", redact_dsn(self._dsn))
            self._conn = open_connection(self._dsn)
            self._session.forget()
        return self._conn

    def _check_table(self) -> tuple[str, int]:
        """The table's (model, dim), once its layout and insertion order are checked."""
        conn = self.conn
        table = self.names.ident().as_string(conn)
        if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()[0]:
            raise BackendUnavailableError(
                f"pgvector table {self.names.table!r} does not exist: nothing was ever written "
                "to it (check CANDLEFIRE_PG_TABLE), so the collection cannot serve from it"
            )
        check_layout(stored_layout(conn, table, self.names.hnsw.as_string(conn)),
                     self.layout, self.names.table)  # fmt: skip
        if not has_insertion_order(conn, self.names):
            raise BackendUnavailableError(
                f"pgvector table {self.names.table!r} has no insertion order column (seq), so "
                "get() cannot answer in Chroma's order: apply any batch (the writer adds it on "
                "its next write), then open the collection again"
            )
        model_id, dim = conn.execute(
            sql.SQL("SELECT model_id, dim FROM {m}").format(m=self.names.meta)
        ).fetchone()
        return model_id, int(dim)

    def embed(self, texts: tuple[str, ...]) -> np.ndarray:
        """The texts' query vectors (one embedder call), from the model the table was built with."""
        if self.embedder.model_id != self.model[0]:
            raise BackendUnavailableError(
                f"pgvector table {self.names.table!r} holds vectors of {self.model[0]!r}; the "
                f"query embedder is {self.embedder.model_id!r}"
            )
        return self.embedder.embed(list(texts))

    def count(self) -> int:
        query = sql.SQL("SELECT count(*) FROM {t}").format(t=self.names.ident())
        with self._lock:
            return int(self.conn.execute(query).fetchone()[0])

    def get(self, call: GetCall) -> dict:
        embeddings = "embeddings" in call.include
        ids = (sql.SQL("c.chunk_id = ANY(%s)"), [list(call.ids)]) if call.ids else None
        parts = [filter_sql(call.where), filter_sql(call.where_document)]
        condition = conjunction(*parts, *([ids] if ids else []))
        statement, params = get_statement(
            self.names, condition, call.where_document is not None, call.limit, call.offset,
            embeddings,
        )  # fmt: skip
        with self._lock:
            rows = self.conn.execute(statement, params).fetchall()
        return get_result([_row(r) for r in rows], call.include)

    def query(self, call: QueryCall, vectors: np.ndarray) -> dict:
        check_dim(self.model, vectors.shape[1])
        with self._lock:
            hits = self._nearest(call, vectors)
        return query_result(hits, call.include)

    def _nearest(self, call: QueryCall, vectors: np.ndarray) -> list[list[Row]]:
        n, embeddings = call.n_results, "embeddings" in call.include
        condition = conjunction(filter_sql(call.where), filter_sql(call.where_document))
        if call.where_document is not None:
            statement, params = document_query_statement(
                self.names, condition, list(vectors), n, embeddings
            )
            return self._ranked(statement, params, len(vectors))
        exact = self._rows.estimate(self.conn, self.names) <= self.ann.full_scan_rows
        hits = self._walk(condition, vectors, n, exact, embeddings)
        short = [] if exact else [i for i, rows in enumerate(hits) if len(rows) < n]
        if short:
            again = self._walk(condition, vectors[short], n, True, embeddings)
            for i, rows in zip(short, again, strict=True):
                hits[i] = rows
        return hits

    def _walk(self, condition, vectors, n, exact, embeddings) -> list[list[Row]]:
        candidates = self.layout.candidates(n, self.ann.rerank_factor)
        if not exact:
            effort = stage_effort(self.ann, "semantic", candidates)
            self._session.apply(self.conn, effort.gucs())
        statement, params = query_statement(
            self.names, condition, list(vectors), n, self.layout, self.model[1], candidates,
            exact, embeddings,
        )  # fmt: skip
        return self._ranked(statement, params, len(vectors))

    def _ranked(self, statement, params, size: int) -> list[list[Row]]:
        hits: list[list[Row]] = [[] for _ in range(size)]
        for record in self.conn.execute(statement, params).fetchall():
            hits[record[0] - 1].append(_row(record[1:-1], distance=record[-1]))
        return hits

    def close(self) -> None:
        self._conn.close()


def _row(record, distance: float | None = None) -> Row:
    """A result row from (chunk_id, document, metadata..., seq[, vector])."""
    chunk_id, document, *values = record[:ROW_WIDTH]
    kept = zip(META_KEYS, values[: len(META_KEYS)], strict=True)
    metadata = {key: value for key, value in kept if value is not None}  # Chroma keeps no None
    vector = record[ROW_WIDTH].to_numpy() if len(record) > ROW_WIDTH else None  # pgvector Vector
    return Row(chunk_id, document, metadata, distance, vector)
