"""Chroma filters and calls as SQL on a pgvector chunks table, with Chroma's semantics.

Metadata is typed as Chroma holds it: text, int and bool columns (`year` NULL when Chroma's
record has no year). A comparison matches only a value of its own kind: an int operand on the int
columns, a bool on the bool column, a str on the text columns, never a bool as a number. A float
operand on an int field is first cast to an integer as Chroma's core does (truncated toward zero,
saturating at the 64-bit bounds; measured on 1.5.9: `{"year": {"$lt": 2000.5}}` does not match
2000, `{"chunk_index": 1.9}` matches 1). A key the collection does not hold, or a value of
another kind, matches nothing, and its `$ne` / `$nin` match everything, as a missing key does in
Chroma. No operator negates a filter, so a NULL (a row without a year) counts as no match
everywhere else.
`$contains` is LIKE with the pattern escaped: exact and case-sensitive, as Chroma's.
"""

from __future__ import annotations

from psycopg import sql

from candlefire_pipeline.app.filters import Contains, Field, Logical
from candlefire_pipeline.app.results import Row
from candlefire_pipeline.backends.chroma.metadata import META_KEYS
from candlefire_pipeline.backends.common import like_pattern
from candlefire_pipeline.backends.pg.layout import Layout
from candlefire_pipeline.backends.pg.sql import SEQ_COLUMN, Names, nearest_rows

#: The value kind of each metadata column (Chroma's types of what the store writes).
KINDS = {key: str for key in META_KEYS} | {
    "chunk_index": int, "citation_count": int, "year": int, "has_full_text": bool,
}  # fmt: skip
NULLABLE = frozenset({"year"})
COMPARISONS = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
POSITIVE = ("$eq", "$in", "$gt", "$gte", "$lt", "$lte")
TRUE, FALSE = sql.SQL("true"), sql.SQL("false")


INT64 = (-(2**63), 2**63 - 1)


def _kind(value) -> type:
    if isinstance(value, bool):
        return bool
    return int if isinstance(value, int | float) else str


def _as_int(value):
    """An int field's operand as Chroma's core takes it: a float truncated and saturated."""
    if not isinstance(value, float):
        return value
    if value >= INT64[1]:
        return INT64[1]
    return INT64[0] if value <= INT64[0] else int(value)


def _column(key: str) -> sql.Composable:
    return sql.Identifier("c", key)


def field_sql(field: Field) -> tuple[sql.Composable, list]:
    """One metadata comparison; a key or value kind the column cannot hold is a constant."""
    kind = KINDS.get(field.key)
    if kind is None or _kind(field.values[0]) is not kind:
        return (FALSE if field.op in POSITIVE else TRUE), []
    column, nullable = _column(field.key), field.key in NULLABLE
    values = [_as_int(v) for v in field.values] if kind is int else list(field.values)
    if field.op == "$in":
        return sql.SQL("{} = ANY(%s)").format(column), [values]
    if field.op == "$nin":
        template = "({0} IS NULL OR {0} <> ALL(%s))" if nullable else "{0} <> ALL(%s)"
        return sql.SQL(template).format(column), [values]
    if field.op == "$ne" and nullable:
        return sql.SQL("{} IS DISTINCT FROM %s").format(column), [values[0]]
    operator = sql.SQL(COMPARISONS[field.op])
    return sql.SQL("{} {} %s").format(column, operator), [values[0]]


def contains_sql(contains: Contains) -> tuple[sql.Composable, list]:
    operator = "NOT LIKE" if contains.negated else "LIKE"
    condition = sql.SQL("c.document {} %s ESCAPE '\\'").format(sql.SQL(operator))
    return condition, [like_pattern(contains.text)]


def filter_sql(node) -> tuple[sql.Composable, list]:
    """A where or where_document tree as one condition on alias `c` (None: true)."""
    if node is None:
        return TRUE, []
    if isinstance(node, Field):
        return field_sql(node)
    if isinstance(node, Contains):
        return contains_sql(node)
    assert isinstance(node, Logical)
    parts = [filter_sql(part) for part in node.parts]
    joiner = sql.SQL(" AND " if node.op == "$and" else " OR ")
    condition = sql.SQL("(") + joiner.join(c for c, _ in parts) + sql.SQL(")")
    return condition, [p for _, params in parts for p in params]


def conjunction(*conditions: tuple[sql.Composable, list]) -> tuple[sql.Composable, list]:
    return (
        sql.SQL(" AND ").join(c for c, _ in conditions),
        [p for _, params in conditions for p in params],
    )


def row_columns(embeddings: bool) -> sql.Composable:
    """chunk_id, document, the metadata columns, seq (and the vector when asked)."""
    names = ["chunk_id", "document", *META_KEYS, SEQ_COLUMN]
    columns = [sql.Identifier("c", name) for name in names]
    if embeddings:
        columns.append(sql.SQL("c.embedding AS embedding_values"))
    return sql.SQL(", ").join(columns)


ROW_WIDTH = 2 + len(META_KEYS) + 1  # before the optional vector


def row_of(record, distance: float | None = None) -> Row:
    """A result row from (chunk_id, document, metadata..., seq[, vector])."""
    chunk_id, document, *values = record[:ROW_WIDTH]
    kept = zip(META_KEYS, values[: len(META_KEYS)], strict=True)
    metadata = {key: value for key, value in kept if value is not None}  # Chroma keeps no None
    vector = record[ROW_WIDTH].to_numpy() if len(record) > ROW_WIDTH else None  # pgvector Vector
    return Row(chunk_id, document, metadata, distance, vector)


def get_statement(names: Names, condition: tuple, document: bool, limit, offset: int,
                  embeddings: bool) -> tuple[sql.Composed, list]:  # fmt: skip
    """Rows in insertion order. A document filter first collects its matches through the
    trigram index (MATERIALIZED: with LIMIT the planner would rather walk seq order and test
    each row, the whole table for an absent term)."""
    cond, params = condition
    cols = row_columns(embeddings)
    if document:
        statement = sql.SQL(
            "WITH hits AS MATERIALIZED (SELECT c.chunk_id, c.seq FROM {t} c WHERE {cond}) "
            "SELECT {cols} FROM (SELECT chunk_id, seq FROM hits ORDER BY seq LIMIT %s OFFSET %s)"
            " h JOIN {t} c ON c.chunk_id = h.chunk_id ORDER BY h.seq"
        )
    else:
        statement = sql.SQL(
            "SELECT {cols} FROM {t} c WHERE {cond} ORDER BY c.seq LIMIT %s OFFSET %s"
        )
    return statement.format(t=names.ident(), cond=cond, cols=cols), [*params, limit, offset]


def query_statement(names: Names, condition: tuple, vectors: list, n: int, layout: Layout,
                    dim: int, candidates: int, exact: bool,
                    embeddings: bool) -> tuple[sql.Composed, list]:  # fmt: skip
    """Each vector's n nearest rows (distance, then insertion order) in one statement."""
    cond, params = condition
    nearest, limits = nearest_rows(
        names, cond, n, layout, dim, candidates, exact, row_columns(embeddings), sql.SQL("c.seq")
    )
    statement = sql.SQL(
        """SELECT q.ord, c.*
        FROM unnest(%b::vector[]) WITH ORDINALITY AS q(vec, ord)
        CROSS JOIN LATERAL ({nearest}) c
        ORDER BY q.ord, c.distance, c.seq"""
    ).format(nearest=nearest)
    return statement, [vectors, *params, *limits]


def document_query_statement(names: Names, condition: tuple, vectors: list, n: int,
                             embeddings: bool) -> tuple[sql.Composed, list]:  # fmt: skip
    """Exact nearest rows among a document filter's matches: the matches are collected once
    through the trigram index (MATERIALIZED, with their vectors), then ranked per query vector."""
    cond, params = condition
    statement = sql.SQL(
        """WITH hits AS MATERIALIZED (SELECT c.chunk_id, c.seq, c.embedding FROM {t} c
                                      WHERE {cond})
        SELECT q.ord, {cols}, best.distance
        FROM unnest(%b::vector[]) WITH ORDINALITY AS q(vec, ord)
        CROSS JOIN LATERAL (SELECT h.chunk_id, h.seq, h.embedding <=> q.vec AS distance
                            FROM hits h ORDER BY distance, h.seq LIMIT %s) best
        JOIN {t} c ON c.chunk_id = best.chunk_id
        ORDER BY q.ord, best.distance, best.seq"""
    ).format(t=names.ident(), cond=cond, cols=row_columns(embeddings))
    return statement, [*params, vectors, n]
