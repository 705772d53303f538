"""How each collection call is answered on one lane (one connection) of the pgvector store.

`get` returns rows in insertion order (the table's `seq`, which follows Chroma's rule). `query`
ranks by cosine distance, equal distances in insertion order: exactly (every matching row
ranked) when the table is at most CANDLEFIRE_PG_FULL_SCAN_ROWS rows or a document filter
narrows it (its matches collected through the trigram index), else through the HNSW index with
the semantic stage's effort and pgvector's iterative scan; a query vector that gets fewer than
n rows from the walk (a selective filter) is asked again exactly, so a list is short only when
fewer rows match. candle-fire's per-term calls are answered from the term cache when it keeps
them (app/pg_terms.py), the same answers in one statement. `count()` is re-counted only after
a write (the table's content version moved). Works with the read-only serving role.

`fetch(statement, params)` runs one statement and returns its rows (app/pg_store.py reads the
content version in the same round trip); the functions here never hold state between calls.
"""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.app import pg_terms
from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.pg_sql import (
    conjunction,
    document_query_statement,
    filter_sql,
    get_statement,
    query_statement,
    row_of,
)
from candlefire_pipeline.app.results import Row
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.insertion_order import has_insertion_order, has_seq_index
from candlefire_pipeline.backends.pg.layout import Layout, check_layout, stage_effort, stored_layout
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms.cache import TermCache
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD


class Statements:
    """The statements of one table rendered once (psycopg parses bytes once)."""

    def __init__(self, names: Names) -> None:
        counts = count_statements(names)
        self.count, self.counted = counts["count"], counts["counted"]
        #: (content version, count) this process read last
        self.known: tuple[int, int] | None = None


def count_statements(names: Names) -> dict[str, bytes]:
    count = sql.SQL("SELECT count(*) FROM {t}").format(t=names.ident())
    # one statement, one snapshot: a count belongs to the version read with it, and is made
    # only when that version is not the one whose count this process holds
    counted = sql.SQL(
        "SELECT content_version, CASE WHEN content_version = %s THEN NULL ELSE ({q}) END FROM {m}"
    ).format(q=count, m=names.meta)
    return {"count": count.as_bytes(None), "counted": counted.as_bytes(None)}


def check_table(conn: psycopg.Connection, names: Names, layout: Layout):
    """The table's (model, dim) and whether it has the seq index, once its layout and insertion
    order are checked."""
    table = names.ident().as_string(conn)
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()[0]:
        raise BackendUnavailableError(
            f"pgvector table {names.table!r} does not exist: nothing was ever written "
            "to it (check CANDLEFIRE_PG_TABLE), so the collection cannot serve from it"
        )
    check_layout(stored_layout(conn, table, names.hnsw.as_string(conn)), layout, names.table)
    seq_index = has_seq_index(conn, names)
    if not has_insertion_order(conn, names):
        raise BackendUnavailableError(
            f"pgvector table {names.table!r} has no insertion order column (seq), so "
            "get() cannot answer in Chroma's order: apply any batch (the writer adds it on "
            "its next write), then open the collection again"
        )
    model_id, dim = conn.execute(
        sql.SQL("SELECT model_id, dim FROM {m}").format(m=names.meta)
    ).fetchone()
    return (model_id, int(dim)), seq_index


def count(store, lane, fetch) -> int:
    """The row count, counted again only when the content version moved (every write,
    the store's or another, bumps it: backends/pg/terms/schema.py); one round trip."""
    statements = store.sql
    store.last.how = "count"
    if not lane.exact.usable():  # no term cache schema: no content version either
        return int(fetch(statements.count)[0][0])
    known = statements.known
    version, counted = fetch(statements.counted, [known[0] if known else -1])[0]
    if counted is None:
        return known[1]
    statements.known = (int(version), int(counted))
    return int(counted)


def get(store, lane, fetch, call: GetCall) -> list[Row]:
    embeddings = "embeddings" in call.include
    rows = _abstract_from_cache(store, lane, fetch, call, embeddings)
    if rows is not None:
        return rows
    store.note("sql")
    ids = (sql.SQL("c.chunk_id = ANY(%s)"), [list(call.ids)]) if call.ids else None
    parts = [filter_sql(call.where), filter_sql(call.where_document)]
    condition = conjunction(*parts, *([ids] if ids else []))
    statement, params = get_statement(
        store.names, condition, call.where_document is not None, call.limit, call.offset,
        embeddings,
    )  # fmt: skip
    return [row_of(r) for r in fetch(statement, params)]


def _abstract_from_cache(store, lane, fetch, call: GetCall, embeddings: bool) -> list[Row] | None:
    variant = pg_terms.abstract_variant(call)
    exact = lane.exact
    if variant is None or not exact.usable():
        return None
    key = exact.key(KEYWORD)
    args = (fetch, lane.conn, store.names, key, variant, embeddings, store.seq_index)
    found = pg_terms.first_abstract(*args)
    how = "kept"
    if found is None and not exact.keeps:
        return None
    if found is None:  # not kept yet: its grounding computed (and kept), then read again
        exact.grounding([variant])
        found = pg_terms.first_abstract(*args)
        how = "kept after computing"
    if found is None:
        return None
    if found.walked and found.rows:  # found once, then read from the entry
        exact.keep_first(variant, found.rows[0].chunk_id, found.version)
    store.note(f"{how}, walked" if found.walked else how)
    return found.rows


def query(store, lane, fetch, call: QueryCall, vectors: np.ndarray) -> list[list[Row]]:
    hits = _from_cache(store, lane, fetch, call, vectors)
    if hits is None:
        store.note("sql")
        hits = _nearest(store, lane, fetch, call, vectors)
    return hits


def _from_cache(store, lane, fetch, call: QueryCall, vectors) -> list[list[Row]] | None:
    """candle-fire's entity and keyword calls from their kept entries (None: computed)."""
    n = call.n_results
    if pg_terms.keyword_variant(call) is not None:
        cache, kind = lane.exact, KEYWORD
    elif pg_terms.entity_shaped(call):
        cache, kind = lane.store.terms, ENTITY
    else:
        return None
    if n > cache.params.depth or not cache.usable():
        return None
    texts, embeddings = list(call.texts), "embeddings" in call.include
    kept = _kept(store, fetch, cache, kind, texts, vectors, n, embeddings)
    missing = [i for i, k in enumerate(kept) if k is None or not k.answers(n)]
    if missing and not cache.keeps:  # a read-only standby: the SQL path, computed once
        return None
    if missing:  # computed and kept (the same answer the SQL path gives), then read
        compute = cache.keyword_candidates if kind == KEYWORD else cache.entity_candidates
        compute([texts[i] for i in missing], vectors[missing], n)
        again = _kept(store, fetch, cache, kind, [texts[i] for i in missing], vectors[missing],
                      n, embeddings)  # fmt: skip
        for i, k in zip(missing, again, strict=True):
            kept[i] = k
        if any(k is None or not k.answers(n) for k in kept):
            return None  # not kept (a write landed, a tie at the cut): the SQL path
    store.note("kept after computing" if missing else "kept")
    return [k.first(n) for k in kept]


def _kept(store, fetch, cache: TermCache, kind: str, texts, vectors, n: int, embeddings: bool):
    return pg_terms.read_kept(fetch, store.names, cache.key(kind), texts, list(vectors), n,
                              embeddings)  # fmt: skip


def _nearest(store, lane, fetch, call: QueryCall, vectors: np.ndarray) -> list[list[Row]]:
    n, embeddings = call.n_results, "embeddings" in call.include
    condition = conjunction(filter_sql(call.where), filter_sql(call.where_document))
    if call.where_document is not None:
        statement, params = document_query_statement(
            store.names, condition, list(vectors), n, embeddings
        )
        return _ranked(fetch, statement, params, len(vectors))
    exact = lane.store.exact_scan()
    hits = _walk(store, lane, fetch, condition, vectors, n, exact, embeddings)
    short = [] if exact else [i for i, rows in enumerate(hits) if len(rows) < n]
    if short:
        again = _walk(store, lane, fetch, condition, vectors[short], n, True, embeddings)
        for i, rows in zip(short, again, strict=True):
            hits[i] = rows
    return hits


def _walk(store, lane, fetch, condition, vectors, n, exact, embeddings) -> list[list[Row]]:
    candidates = store.layout.candidates(n, store.ann.rerank_factor)
    if not exact:
        lane.store.apply_effort(stage_effort(store.ann, "semantic", candidates))
    statement, params = query_statement(
        store.names, condition, list(vectors), n, store.layout, store.model[1], candidates,
        exact, embeddings,
    )  # fmt: skip
    return _ranked(fetch, statement, params, len(vectors))


def _ranked(fetch, statement, params, size: int) -> list[list[Row]]:
    hits: list[list[Row]] = [[] for _ in range(size)]
    for record in fetch(statement, params):
        hits[record[0] - 1].append(row_of(record[1:-1], distance=record[-1]))
    return hits
