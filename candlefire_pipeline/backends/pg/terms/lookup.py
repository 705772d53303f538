"""Reading kept entries: one statement for every text of a stage, with the first n rows each."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import RESULT_FIELDS, ResultRow
from candlefire_pipeline.backends.pg.sql import Names, result_columns
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.entries import Entry

log = logging.getLogger(__name__)

_ENTRY_COLUMNS = (
    "id", "kind", "text", "listed", "complete", "approximate", "witness", "witness_known",
    "abstract_witness", "abstract_known",
)  # fmt: skip


@dataclass(frozen=True)
class Key:
    """What an entry is kept under besides its text: its stage, how it was made, the model."""

    kind: str
    recipe: str
    model_id: str


@dataclass(frozen=True)
class Found:
    """A kept entry (its grounding facts; its list is `length` long) and the result rows of the
    list's first n members."""

    entry: Entry
    rows: list[ResultRow]
    length: int

    def answers(self, n: int) -> bool:
        """Whether the list gives the exact top n (long enough, or holding every candidate)."""
        return self.entry.listed and (self.entry.complete or self.length >= n)


#: An entry answers a query vector within this Euclidean distance of its own: the same text
#: embedded in another batch moves by ~5e-8 (measured, ONNX), which moves a similarity by at
#: most as much, far inside the retriever's 3e-6 tie margin. A farther vector is another query.
SAME_VECTOR = 1e-6


def lookup_query(
    names: Names, key: Key, texts: list[str], vectors: list | None, n: int
) -> tuple[sql.Composed, list]:
    """Rows (ord, entry columns..., length, rank, result columns..., similarity); one row per
    entry with a NULL rank when it lists nothing within the first n. With `vectors`, an entry
    answers only the vector it was ranked by."""
    entry_cols = sql.SQL(", ").join(sql.Identifier("e", c) for c in _ENTRY_COLUMNS)
    if vectors is None:
        source = sql.SQL("unnest(%s::text[]) WITH ORDINALITY AS w(text, ord)")
        same, inputs = sql.SQL("true"), [texts]
    else:
        source = sql.SQL("unnest(%s::text[], %b::vector[]) WITH ORDINALITY AS w(text, vec, ord)")
        same = sql.SQL("(e.vector <-> w.vec) <= {}").format(sql.Literal(SAME_VECTOR))
        inputs = [texts, vectors]
    query = sql.SQL(
        """WITH w AS (SELECT * FROM {source}),
        e AS (
            SELECT w.ord, e.* FROM w JOIN {terms} e
            ON e.kind = %s AND e.recipe = %s AND e.model_id = %s AND e.text = w.text
            WHERE {valid} AND {same}
        )
        SELECT e.ord, {entry_cols}, cardinality(e.ids), r.rank, {cols}, 1 - r.distance
        FROM e LEFT JOIN LATERAL (
            SELECT u.chunk_id, u.distance, u.rank
            FROM unnest(e.ids[1:%s], e.distances[1:%s])
                WITH ORDINALITY AS u(chunk_id, distance, rank)
        ) r ON true
        LEFT JOIN {t} c ON c.chunk_id = r.chunk_id
        ORDER BY e.ord, r.rank"""
    ).format(
        source=source,
        terms=schema.terms_table(names),
        valid=schema.valid_condition(names),
        same=same,
        entry_cols=entry_cols,
        cols=result_columns(),
        t=names.ident(),
    )
    return query, [*inputs, key.kind, key.recipe, key.model_id, int(n), int(n)]


def lookup(
    conn: psycopg.Connection,
    names: Names,
    key: Key,
    texts: Sequence[str],
    n: int,
    vectors: list | None = None,
) -> list[Found | None]:
    """Per text (and vector, when given) its kept entry under `key`, or None (nothing while the
    cache is not valid for the table's content). An entry whose listed chunk is missing is None."""
    texts = list(texts)
    if not texts:
        return []
    query, params = lookup_query(names, key, texts, vectors, n)
    grouped: dict[int, list[tuple]] = {}
    for row in conn.execute(query, params).fetchall():
        grouped.setdefault(row[0], []).append(row)
    found: list[Found | None] = [None] * len(texts)
    for ordinal, rows in grouped.items():
        entry, length = _entry(rows[0]), rows[0][len(_ENTRY_COLUMNS) + 1]
        listed = [r for r in rows if r[len(_ENTRY_COLUMNS) + 2] is not None]
        results = [_result(r[len(_ENTRY_COLUMNS) + 3 :]) for r in listed]
        if any(r is None for r in results):
            log.warning("term cache entry %r lists a chunk not in the table; computed again",
                        entry.text)  # fmt: skip
            continue
        found[ordinal - 1] = Found(entry, results, int(length))
    return found


def _entry(row: tuple) -> Entry:
    values = dict(zip(_ENTRY_COLUMNS, row[1 : len(_ENTRY_COLUMNS) + 1], strict=True))
    return Entry(**values)


def _result(row: tuple) -> ResultRow | None:
    record = dict(zip(RESULT_FIELDS, row, strict=True))
    if record["chunk_id"] is None:
        return None
    return common.result_row(record["chunk_id"], record["document"], record, record["similarity"])
