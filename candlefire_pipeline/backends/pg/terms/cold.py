"""SQL of the cold path: what a missing term costs, one statement per stage.

- `probe_query`: per keyword variant, at most `limit` chunks holding it (trigram index), with
  their distance to the variant's own vector: how many hold it (up to the limit), a witness, an
  abstract witness, and the exact top `depth` when the limit was not reached.
- `grounding_query`: per variant, one chunk holding it and one abstract chunk holding it.
- `rows_query`: the result columns of chunks by id.

An answer computed here is kept only if the table's content version, read before the first
of these statements, has not moved when it is stored (cache.py).
"""

from __future__ import annotations

from psycopg import sql

from candlefire_pipeline.backends.common import like_pattern
from candlefire_pipeline.backends.pg.sql import Names, result_columns

_ESCAPE = sql.SQL("ESCAPE '\\'")


def _operator(mode: str) -> sql.SQL:
    return sql.SQL("ILIKE" if mode == "ilike" else "LIKE")


def probe_query(
    names: Names, mode: str, variants: list[str], vectors: list, limit: int | None, depth: int
) -> tuple[sql.Composed, list]:
    """Rows (ord, holders, witness, abstract_witness, ids, distances), ord from 1."""
    cap = sql.SQL("LIMIT %s") if limit is not None else sql.SQL("")
    query = sql.SQL(
        """WITH v AS (
            SELECT * FROM unnest(%s::text[], %b::vector[]) WITH ORDINALITY AS v(pattern, vec, ord)
        ), held AS MATERIALIZED (
            SELECT v.ord, h.chunk_id, h.chunk_index, h.embedding <=> v.vec AS distance
            FROM v CROSS JOIN LATERAL (
                SELECT c.chunk_id, c.chunk_index, c.embedding FROM {t} c
                WHERE c.document {op} v.pattern {esc} {cap}) h
        )
        SELECT v.ord, count(h.chunk_id),
            min(h.chunk_id COLLATE "C"),
            min(h.chunk_id COLLATE "C") FILTER (WHERE h.chunk_index = 0),
            coalesce((array_agg(h.chunk_id ORDER BY h.distance, h.chunk_id COLLATE "C")
                FILTER (WHERE h.chunk_id IS NOT NULL))[1:%s], '{{}}'),
            coalesce((array_agg(h.distance ORDER BY h.distance, h.chunk_id COLLATE "C")
                FILTER (WHERE h.chunk_id IS NOT NULL))[1:%s], '{{}}')
        FROM v LEFT JOIN held h ON h.ord = v.ord
        GROUP BY v.ord ORDER BY v.ord"""
    ).format(t=names.ident(), op=_operator(mode), esc=_ESCAPE, cap=cap)
    params: list = [[like_pattern(v) for v in variants], vectors]
    if limit is not None:
        params.append(int(limit))
    return query, [*params, int(depth), int(depth)]


def grounding_query(names: Names, mode: str, variants: list[str]) -> tuple[sql.Composed, list]:
    """Rows (ord, witness, abstract_witness): any holder, any abstract holder."""
    one = sql.SQL(
        "(SELECT c.chunk_id FROM {t} c WHERE c.document {op} v.pattern {esc}{extra} LIMIT 1)"
    )
    witness = one.format(t=names.ident(), op=_operator(mode), esc=_ESCAPE, extra=sql.SQL(""))
    abstract = one.format(
        t=names.ident(), op=_operator(mode), esc=_ESCAPE, extra=sql.SQL(" AND c.chunk_index = 0")
    )
    query = sql.SQL(
        """SELECT v.ord, {w}, {a}
        FROM unnest(%s::text[]) WITH ORDINALITY AS v(pattern, ord) ORDER BY v.ord"""
    ).format(w=witness, a=abstract)
    return query, [[like_pattern(v) for v in variants]]


def rows_query(names: Names, chunk_ids: list[str]) -> tuple[sql.Composed, list]:
    """The result columns (similarity NULL) of these chunks."""
    query = sql.SQL(
        "SELECT {cols}, NULL::float8 AS similarity FROM {t} c WHERE c.chunk_id = ANY(%s)"
    ).format(cols=result_columns(), t=names.ident())
    return query, [chunk_ids]


#: Planner settings the cold statements run with (SET LOCAL, one transaction each): a substring
#: probe goes through the trigram index (a sequential scan that hopes to stop early reads the
#: whole table for an absent term); a keyword walk through the HNSW index.
PROBE_PLAN = {"enable_seqscan": "off"}
WALK_PLAN = {"enable_seqscan": "off", "enable_bitmapscan": "off"}


def plan_settings(settings: dict[str, str]) -> sql.Composed:
    calls = sql.SQL(", ").join(
        sql.SQL("set_config({}, {}, true)").format(sql.Literal(k), sql.Literal(v))
        for k, v in settings.items()
    )
    return sql.SQL("SELECT {}").format(calls)
