"""The collection's calls answered by a pgvector chunks table (app/pg_sql.py holds the SQL).

`get` returns rows in insertion order (the table's `seq`, which follows Chroma's rule). `query`
ranks by cosine distance, equal distances in insertion order: exactly (every matching row
ranked) when the table is at most CANDLEFIRE_PG_FULL_SCAN_ROWS rows or a document filter
narrows it (its matches collected through the trigram index), else through the HNSW index with
the semantic stage's effort and pgvector's iterative scan; a query vector that gets fewer than
n rows from the walk (a selective filter) is asked again exactly, so a list is short only when
fewer rows match. candle-fire's per-term calls are answered from the term cache when it keeps
them (app/pg_terms.py), the same answers in one statement. `count()` is re-counted only after
a write (the table's content version moved). Works with the read-only serving role.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import replace

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.app import pg_terms
from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.model_check import embed_checked, pg_sample
from candlefire_pipeline.app.pg_sql import (
    conjunction,
    document_query_statement,
    filter_sql,
    get_statement,
    query_statement,
    row_of,
)
from candlefire_pipeline.app.results import Row, get_result, query_result
from candlefire_pipeline.backends.common import BackendUnavailableError, check_dim
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.insertion_order import has_insertion_order, has_seq_index
from candlefire_pipeline.backends.pg.layout import (
    AnnParams,
    Layout,
    check_layout,
    stage_effort,
    stored_layout,
)
from candlefire_pipeline.backends.pg.terms.cache import CacheParams, TermCache
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD

log = logging.getLogger(__name__)


class PgCollectionStore:
    """Reads of one chunks table (a generation's) through one connection, one call at a time."""

    name = "pgvector"

    def __init__(self, dsn: str, table: str, ann: AnnParams, embedder,
                 cache: CacheParams | None = None) -> None:  # fmt: skip
        self.ann, self.layout = ann, Layout.of(ann)
        self.embedder = embedder
        self._lock = threading.Lock()  # a call's effort and its statements go together
        cache = cache or CacheParams()
        # the store whose connection, session effort and term caches the calls share; LIKE: the
        # collection's $contains is case-sensitive whatever the writer's substring mode
        self._store = PgVectorBackend(dsn, table, substring_mode="like", ann=ann, cache=cache)
        self.names = self._store.names
        #: keyword entries ranked over every holder (the document filter is exact here)
        self._exact = TermCache(self._store, replace(cache, keyword_walk="off"))
        self._counted: tuple[int, int] | None = None  # (content version, count)
        self._sql = _count_statements(self.names)
        #: calls by how they were answered: "kept" (an entry read), "kept after computing" (a
        #: miss computed and kept, then read), ", walked" (an abstract holder found along the
        #: seq index), "sql" (every other shape, or an entry that could not answer)
        self.answered: Counter[str] = Counter()
        try:
            self.model = self._check_table()
        except BaseException:
            self._store.close()
            raise
        # the table has `seq` (checked): a computed keyword list names its first abstract holder
        self._exact.first_abstracts = True

    @property
    def conn(self) -> psycopg.Connection:
        return self._store.conn  # reconnects (and forgets the session's effort) when lost

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
        self._seq_index = has_seq_index(conn, self.names)
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
        """The texts' query vectors (one embedder call), from the model the table was built with
        (app/model_check.py: the embedder's recorded id, or the app's function checked once
        against the table's first stored chunks)."""

        def stored(k: int):
            with self._lock:
                return pg_sample(self.conn, self.names, k)

        where = f"pgvector table {self.names.table!r}"
        return embed_checked(self.embedder, where, self.model, stored, texts)

    def count(self) -> int:
        """The row count, counted again only when the content version moved (every write,
        the store's or another, bumps it: backends/pg/terms/schema.py); one round trip."""
        with self._lock:
            if not self._exact.usable():  # no term cache schema: no content version either
                return int(self.conn.execute(self._sql["count"]).fetchone()[0])
            known = self._counted[0] if self._counted else -1
            version, count = self.conn.execute(self._sql["counted"], [known]).fetchone()
            if count is not None:
                self._counted = (int(version), int(count))
            return self._counted[1]

    def get(self, call: GetCall) -> dict:
        embeddings = "embeddings" in call.include
        with self._lock:
            rows = self._abstract_from_cache(call, embeddings)
            if rows is None:
                self.answered["sql"] += 1
                rows = self._get(call, embeddings)
        return get_result(rows, call.include)

    def _get(self, call: GetCall, embeddings: bool) -> list[Row]:
        ids = (sql.SQL("c.chunk_id = ANY(%s)"), [list(call.ids)]) if call.ids else None
        parts = [filter_sql(call.where), filter_sql(call.where_document)]
        condition = conjunction(*parts, *([ids] if ids else []))
        statement, params = get_statement(
            self.names, condition, call.where_document is not None, call.limit, call.offset,
            embeddings,
        )  # fmt: skip
        return [row_of(r) for r in self.conn.execute(statement, params).fetchall()]

    def _abstract_from_cache(self, call: GetCall, embeddings: bool) -> list[Row] | None:
        variant = pg_terms.abstract_variant(call)
        if variant is None or not self._exact.usable():
            return None
        key = self._exact.key(KEYWORD)
        args = (self.conn, self.names, key, variant, embeddings, self._seq_index)
        found = pg_terms.first_abstract(*args)
        how = "kept"
        if found is None and not self._exact.keeps:
            return None
        if found is None:  # not kept yet: its grounding computed (and kept), then read again
            self._exact.grounding([variant])
            found = pg_terms.first_abstract(*args)
            how = "kept after computing"
        if found is None:
            return None
        if found.walked and found.rows:  # found once, then read from the entry
            self._exact.keep_first(variant, found.rows[0].chunk_id, found.version)
        self.answered[f"{how}, walked" if found.walked else how] += 1
        return found.rows

    def query(self, call: QueryCall, vectors: np.ndarray) -> dict:
        check_dim(self.model, vectors.shape[1])
        with self._lock:
            hits = self._from_cache(call, vectors)
            if hits is None:
                self.answered["sql"] += 1
                hits = self._nearest(call, vectors)
        return query_result(hits, call.include)

    def _from_cache(self, call: QueryCall, vectors: np.ndarray) -> list[list[Row]] | None:
        """candle-fire's entity and keyword calls from their kept entries (None: computed)."""
        n = call.n_results
        if pg_terms.keyword_variant(call) is not None:
            cache, kind = self._exact, KEYWORD
        elif pg_terms.entity_shaped(call):
            cache, kind = self._store.terms, ENTITY
        else:
            return None
        if n > cache.params.depth or not cache.usable():
            return None
        texts = list(call.texts)
        kept = self._kept(cache, kind, texts, vectors, n, "embeddings" in call.include)
        missing = [i for i, k in enumerate(kept) if k is None or not k.answers(n)]
        if missing and not cache.keeps:  # a read-only standby: the SQL path, computed once
            return None
        if missing:  # computed and kept (the same answer the SQL path gives), then read
            compute = cache.keyword_candidates if kind == KEYWORD else cache.entity_candidates
            compute([texts[i] for i in missing], vectors[missing], n)
            again = self._kept(cache, kind, [texts[i] for i in missing], vectors[missing], n,
                               "embeddings" in call.include)  # fmt: skip
            for i, k in zip(missing, again, strict=True):
                kept[i] = k
            if any(k is None or not k.answers(n) for k in kept):
                return None  # not kept (a write landed, a tie at the cut): the SQL path
        self.answered["kept after computing" if missing else "kept"] += 1
        return [k.first(n) for k in kept]

    def _kept(self, cache: TermCache, kind: str, texts, vectors, n: int, embeddings: bool):
        return pg_terms.read_kept(self.conn, self.names, cache.key(kind), texts, list(vectors),
                                  n, embeddings)  # fmt: skip

    def _nearest(self, call: QueryCall, vectors: np.ndarray) -> list[list[Row]]:
        n, embeddings = call.n_results, "embeddings" in call.include
        condition = conjunction(filter_sql(call.where), filter_sql(call.where_document))
        if call.where_document is not None:
            statement, params = document_query_statement(
                self.names, condition, list(vectors), n, embeddings
            )
            return self._ranked(statement, params, len(vectors))
        exact = self._store.exact_scan()
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
            self._store.apply_effort(stage_effort(self.ann, "semantic", candidates))
        statement, params = query_statement(
            self.names, condition, list(vectors), n, self.layout, self.model[1], candidates,
            exact, embeddings,
        )  # fmt: skip
        return self._ranked(statement, params, len(vectors))

    def _ranked(self, statement, params, size: int) -> list[list[Row]]:
        hits: list[list[Row]] = [[] for _ in range(size)]
        for record in self.conn.execute(statement, params).fetchall():
            hits[record[0] - 1].append(row_of(record[1:-1], distance=record[-1]))
        return hits

    def close(self) -> None:
        self._store.close()


def _count_statements(names) -> dict[str, bytes]:
    count = sql.SQL("SELECT count(*) FROM {t}").format(t=names.ident())
    # one statement, one snapshot: a count belongs to the version read with it, and is made
    # only when that version is not the one whose count this process holds
    counted = sql.SQL(
        "SELECT content_version, CASE WHEN content_version = %s THEN NULL ELSE ({q}) END FROM {m}"
    ).format(q=count, m=names.meta)
    return {"count": count.as_bytes(None), "counted": counted.as_bytes(None)}
