"""Reading the term cache of a store and checking every entry against a fresh computation."""

from __future__ import annotations

from psycopg import sql

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.upkeep import as_array
from candlefire_pipeline_tests.backends.pg.terms.corpus import NAMES, VARIANTS, vectors

#: Rows asked for a complete list's fresh computation (more than any test table holds).
EVERY = 100_000


def warm(store, n: int) -> None:
    """Keep every test text: keyword lists, entity lists, grounding."""
    store.substring_candidates(list(VARIANTS), vectors(VARIANTS), n)
    store.semantic_candidates(vectors(NAMES), n, stage="entities", texts=list(NAMES))
    store.ground_terms([[v] for v in VARIANTS])


def kept(store) -> list[dict]:
    """Every entry of the store's term cache, as dicts."""
    query = sql.SQL(
        "SELECT id, kind, recipe, text, vector, listed, ids, distances, complete, approximate, "
        "witness, witness_known, abstract_witness, abstract_known FROM {e} ORDER BY id"
    ).format(e=schema.terms_table(store.names))
    cur = store.conn.execute(query)
    columns = [c.name for c in cur.description]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def fresh_list(store, entry: dict) -> tuple[list[str], list[float]]:
    """The entry's list computed from scratch, exactly, as long as the kept one."""
    n = EVERY if entry["complete"] else max(len(entry["ids"]), 1)
    vector = as_array(entry["vector"])
    mode = entry["recipe"].split(";")[0]
    if entry["kind"] == "keyword":
        query, params = pg_sql.substring_query(
            store.names, [entry["text"]], mode, Filter(), [vector], n, store.layout
        )
    else:
        dim = len(vector)
        query, params = pg_sql.semantic_query(
            store.names, Filter(), [vector], n, store.layout, dim, n, exact=True
        )
    rows = store.conn.execute(query, params).fetchall()
    rows = rows[: len(entry["ids"])] if not entry["complete"] else rows
    return [r[1] for r in rows], [r[-1] for r in rows]


def fresh_grounding(store, entry: dict) -> tuple[bool, bool]:
    mode = entry["recipe"].split(";")[0]
    out = []
    for where in (Filter(), Filter(abstract_only=True)):
        query, params = pg_sql.contains_query(store.names, [entry["text"]], mode, where)
        out.append(bool(store.conn.execute(query, params).fetchone()[0]))
    return out[0], out[1]


def differences(store) -> list[str]:
    """Every way a kept entry differs from a fresh computation (empty: the cache is exact)."""
    found = []
    for entry in kept(store):
        label = f"{entry['kind']} {entry['text']!r}"
        if entry["listed"] and not entry["approximate"]:
            ids, distances = fresh_list(store, entry)
            if (ids, distances) != (list(entry["ids"]), list(entry["distances"])):
                found.append(f"{label}: list {entry['ids']} != fresh {ids}")
        if entry["kind"] == "keyword":
            corpus, abstract = fresh_grounding(store, entry)
            if entry["witness_known"] and (entry["witness"] is not None) != corpus:
                found.append(f"{label}: corpus {entry['witness']!r} but fresh says {corpus}")
            if entry["abstract_known"] and (entry["abstract_witness"] is not None) != abstract:
                found.append(f"{label}: abstract {entry['abstract_witness']!r}, fresh {abstract}")
    return found


def valid(store) -> bool:
    content, cache = schema.versions(store.conn, store.names)
    return content == cache
