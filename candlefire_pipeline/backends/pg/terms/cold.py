"""SQL of the cold path: what a missing term costs, one statement per stage.

- `probe_query`: per keyword variant, at most `limit` chunks holding it (through the trigram
  index, or the phrase index for a variant routed to it: backends/pg/phrase.py), with
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
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg.sql import Names, result_columns

_ESCAPE = sql.SQL("ESCAPE '\\'")


def _operator(mode: str) -> sql.SQL:
    return sql.SQL("ILIKE" if mode == "ilike" else "LIKE")


def _holding(names: Names, mode: str, by_phrase: bool, extra: sql.Composable) -> sql.Composed:
    """Chunks holding v.pattern: through the trigram index, or through the phrase index with the
    substring checked on each candidate (written so that the trigram index cannot serve it: a
    bitmap AND of the two would recompute every candidate's phrase keys on its recheck)."""
    if by_phrase:
        cond = sql.SQL("{keys} @> v.keys AND (c.document || '') {op} v.pattern {esc}").format(
            keys=phrase.doc_keys(mode), op=_operator(mode), esc=_ESCAPE
        )
    else:
        cond = sql.SQL("c.document {op} v.pattern {esc}").format(op=_operator(mode), esc=_ESCAPE)
    return sql.SQL("FROM {t} c WHERE {cond}{extra}").format(t=names.ident(), cond=cond, extra=extra)


def _variants(mode: str, routed: bool, vectors: bool) -> sql.Composed:
    """The variants as rows v(pattern[, vec], ord[, by_phrase, keys]), ord from 1."""
    columns = ["pattern", *(["vec"] if vectors else []), *(["phrased"] if routed else [])]
    types = [
        "%s::text[]",
        *(["%b::vector[]"] if vectors else []),
        *(["%s::bool[]"] if routed else []),
    ]
    rows = sql.SQL("unnest({types}) WITH ORDINALITY AS v({columns}, ord)").format(
        types=sql.SQL(", ").join(sql.SQL(t) for t in types),
        columns=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
    )
    if not routed:
        return sql.SQL("SELECT v.* FROM {}").format(rows)
    return sql.SQL(
        """SELECT v.*, coalesce(v.phrased AND cardinality(k.keys) > 0, false) AS by_phrase, k.keys
        FROM {rows} CROSS JOIN LATERAL (
            SELECT CASE WHEN v.phrased THEN {keys} END AS keys) k"""
    ).format(rows=rows, keys=phrase.query_keys(mode, sql.SQL("v.pattern")))


def probe_query(
    names: Names,
    mode: str,
    variants: list[str],
    vectors: list,
    limit: int | None,
    depth: int,
    phrased: list[bool] | None = None,
    first_abstract: bool = False,
) -> tuple[sql.Composed, list]:
    """Rows (ord, holders, witness, abstract_witness, ids, distances, first_abstract), ord from
    1; a `phrased` variant's holders are found through the phrase index. `first_abstract` (the
    table has `seq`): the first abstract holder in insertion order, among the holders seen (all
    of them when the limit was not reached), else NULL."""
    routed = any(phrased or ())
    cap = sql.SQL(" LIMIT %s") if limit is not None else sql.SQL("")
    seq = sql.SQL(", c.seq" if first_abstract else ", NULL::bigint AS seq")
    columns = sql.SQL("SELECT c.chunk_id, c.chunk_index, c.embedding{seq} ").format(seq=seq)
    trigram = sql.SQL("{c}{f}").format(c=columns, f=_holding(names, mode, False, cap))
    holders = trigram
    if routed:
        holders = sql.SQL(
            "(SELECT * FROM ({trigram}) a WHERE NOT v.by_phrase) UNION ALL "
            "(SELECT * FROM ({c}{f}) b WHERE v.by_phrase)"
        ).format(trigram=trigram, c=columns, f=_holding(names, mode, True, cap))
    query = sql.SQL(
        """WITH v AS ({variants}), held AS MATERIALIZED (
            SELECT v.ord, h.chunk_id, h.chunk_index, h.seq, h.embedding <=> v.vec AS distance
            FROM v CROSS JOIN LATERAL ({holders}) h
        )
        SELECT v.ord, count(h.chunk_id),
            min(h.chunk_id COLLATE "C"),
            min(h.chunk_id COLLATE "C") FILTER (WHERE h.chunk_index = 0),
            coalesce((array_agg(h.chunk_id ORDER BY h.distance, h.chunk_id COLLATE "C")
                FILTER (WHERE h.chunk_id IS NOT NULL))[1:%s], '{{}}'),
            coalesce((array_agg(h.distance ORDER BY h.distance, h.chunk_id COLLATE "C")
                FILTER (WHERE h.chunk_id IS NOT NULL))[1:%s], '{{}}'),
            (array_agg(h.chunk_id ORDER BY h.seq)
                FILTER (WHERE h.chunk_index = 0 AND h.seq IS NOT NULL))[1]
        FROM v LEFT JOIN held h ON h.ord = v.ord
        GROUP BY v.ord ORDER BY v.ord"""
    ).format(variants=_variants(mode, routed, vectors=True), holders=holders)
    params: list = [[like_pattern(v) for v in variants], vectors]
    if routed:
        params.append(list(phrased))
    if limit is not None:
        params += [int(limit)] * (2 if routed else 1)
    return query, [*params, int(depth), int(depth)]


def grounding_query(
    names: Names, mode: str, variants: list[str], phrased: list[bool] | None = None
) -> tuple[sql.Composed, list]:
    """Rows (ord, witness, abstract_witness): any holder, any abstract holder."""
    routed = any(phrased or ())

    def one(abstract: bool) -> sql.Composed:
        extra = sql.SQL(" AND c.chunk_index = 0" if abstract else "")
        first = sql.SQL("(SELECT c.chunk_id {f} LIMIT 1)")
        trigram = first.format(f=_holding(names, mode, False, extra))
        if not routed:
            return trigram
        return sql.SQL("CASE WHEN v.by_phrase THEN {p} ELSE {t} END").format(
            p=first.format(f=_holding(names, mode, True, extra)), t=trigram
        )

    query = sql.SQL("SELECT v.ord, {w}, {a} FROM ({v}) v ORDER BY v.ord").format(
        w=one(False), a=one(True), v=_variants(mode, routed, vectors=False)
    )
    params: list = [[like_pattern(v) for v in variants]]
    return query, [*params, list(phrased)] if routed else params


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
