"""candle-fire's per-term calls on the collection, answered from the pgvector term cache.

The app asks the same few shapes of call for every name and keyword variant of a request, and
the same names and variants recur across requests. Three shapes are answered from the entries
the term cache keeps exact through every write (backends/pg/terms), one statement each when the
entry is kept:

- `query(query_texts=[...], n_results=n)`, no filter: each text's entity entry (its nearest
  chunks; the entries ServingReader keeps, so the two share them);
- `query(query_texts=[v], n_results=n, where_document={"$contains": v})`, the text being the
  substring (candle-fire's keyword search and corpus grounding): v's keyword entry, ranked over
  every holder (the recipe `like;walk=off`: exact, as the collection's own document filter);
- `get(where={"chunk_index": {"$eq": 0}}, where_document={"$contains": v}, limit=1)` (grounding
  in an abstract): the same entry's abstract fact; none is an empty answer, and a list holding
  every holder names the first abstract among them in insertion order. A variant held by more
  chunks than a list keeps is walked for once; its first abstract holder is then kept in the
  entry (`abstract_first`, exact through every write: backends/pg/terms/entries.py).

Entries rank by (distance, chunk id), the collection by (distance, insertion order): the first n
members are re-ordered by insertion order within equal distances, and an entry whose tie at the
cut may hold a member past it does not answer (the call is computed instead). Any other shape,
and any entry that cannot answer, goes to the SQL path (app/pg_answers.py): the answers are the
same, only slower.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.filters import Contains, Field
from candlefire_pipeline.app.pg_sql import ROW_WIDTH, row_columns, row_of
from candlefire_pipeline.app.results import Row
from candlefire_pipeline.backends.common import like_pattern
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.lookup import SAME_VECTOR, Key

ABSTRACT = Field("chunk_index", "$eq", (0,))
#: runs one statement and returns its rows (app/pg_store.py reads the version beside it)
Fetch = Callable[..., list[tuple]]


@dataclass(frozen=True)
class Kept:
    """A kept entry as one call reads it: its facts and the rows of its first n members."""

    listed: bool
    complete: bool
    length: int
    #: (row, insertion order) of the first n members, in the entry's order
    rows: list[tuple[Row, int]]
    #: the distance of member n + 1 (None: the list ends within n)
    after: float | None

    def answers(self, n: int) -> bool:
        """Whether the first n in (distance, insertion order) are known: the list reaches n
        (or holds every candidate) and no tie at the cut reaches past it."""
        if not self.listed or len(self.rows) < min(n, self.length):
            return False
        if self.length < n:
            return self.complete
        last = self.rows[n - 1][0].distance
        return self.after is not None and self.after > last if self.length > n else self.complete

    def first(self, n: int) -> list[Row]:
        ranked = sorted(self.rows[:n], key=lambda pair: (pair[0].distance, pair[1]))
        return [row for row, _ in ranked]


def keyword_variant(call: QueryCall) -> str | None:
    """The variant of a keyword-shaped query (the text is the substring), else None."""
    found = call.where_document
    if (call.where is None and isinstance(found, Contains) and not found.negated
            and call.texts is not None and set(call.texts) == {found.text}):  # fmt: skip
        return found.text
    return None


def entity_shaped(call: QueryCall) -> bool:
    return call.texts is not None and call.where is None and call.where_document is None


def abstract_variant(call: GetCall) -> str | None:
    """The variant of a grounding-in-an-abstract get, else None."""
    found = call.where_document
    if (call.where == ABSTRACT and isinstance(found, Contains) and not found.negated
            and call.ids is None and call.limit == 1 and call.offset == 0):  # fmt: skip
        return found.text
    return None


def read_kept(fetch: Fetch, names: Names, key: Key, texts: list[str], vectors: list, n: int,
              embeddings: bool) -> list[Kept | None]:  # fmt: skip
    """Per text, its entry under `key` ranked for the vector given with it (None: no entry,
    another vector, or the cache does not describe the table now)."""
    params = [texts, vectors, key.kind, key.recipe, key.model_id, n, n, n]
    grouped: dict[int, list[tuple]] = {}
    for record in fetch(_kept_statement(names.table, embeddings), params):
        grouped.setdefault(record[0], []).append(record)
    return [_kept(grouped.get(i + 1)) for i in range(len(texts))]


# The statements are rendered once per table: composing them on every call cost a quarter of a
# kept answer's time (psycopg renders a Composed for each execute; bytes are parsed once).
@functools.lru_cache(maxsize=256)
def _kept_statement(table: str, embeddings: bool) -> bytes:
    names = Names(table)
    return sql.SQL(
        """WITH w AS (SELECT * FROM unnest(%s::text[], %b::vector[]) WITH ORDINALITY
                      AS w(text, vec, ord)),
        e AS (SELECT w.ord, e.listed, e.complete, e.ids, e.distances FROM w JOIN {terms} e
              ON e.kind = %s AND e.recipe = %s AND e.model_id = %s AND e.text = w.text
              WHERE {valid} AND (e.vector <-> w.vec) <= {same})
        SELECT e.ord, e.listed, e.complete, cardinality(e.ids), e.distances[%s + 1], r.rank,
               r.distance, {cols}
        FROM e LEFT JOIN LATERAL unnest(e.ids[1:%s], e.distances[1:%s])
            WITH ORDINALITY AS r(chunk_id, distance, rank) ON true
        LEFT JOIN {t} c ON c.chunk_id = r.chunk_id
        ORDER BY e.ord, r.rank"""
    ).format(
        terms=schema.terms_table(names), valid=schema.valid_condition(names),
        same=sql.Literal(SAME_VECTOR), cols=row_columns(embeddings), t=names.ident(),
    ).as_bytes(None)  # fmt: skip


def _kept(records: list[tuple] | None) -> Kept | None:
    if not records:
        return None
    _, listed, complete, length, after, *_ = records[0]
    rows = []
    for record in records:
        if record[5] is None:  # an entry listing nothing
            continue
        if record[7] is None:  # a member no longer in the table: the cache moved on
            return None
        rows.append((row_of(record[7:], record[6]), record[7 + ROW_WIDTH - 1]))
    return Kept(listed, complete, int(length), rows, after)


@dataclass(frozen=True)
class Abstract:
    """A grounding-in-an-abstract answer from v's keyword entry."""

    rows: list[Row]
    #: found by walking the table (the entry did not know its first abstract holder)
    walked: bool
    #: the content version the entry was read at: a walked answer is kept under it
    version: int


def first_abstract(fetch: Fetch, conn: psycopg.Connection, names: Names, key: Key, variant: str,
                   embeddings: bool, walks: bool) -> Abstract | None:  # fmt: skip
    """A grounding-in-an-abstract get from v's keyword entry: no row when no abstract holds v;
    the first abstract holder (insertion order) from the entry when it keeps it or a list
    holding every holder, else (`walks`: the seq index exists) walked for; None when the entry
    is missing or cannot tell."""
    params = [key.kind, key.recipe, key.model_id, variant]
    rows = fetch(_abstract_statement(names.table, embeddings), params)
    found = rows[0] if rows else None
    if found is None or not found[0]:
        return None
    _, held, knows_first, version = found[:4]
    if not held:
        return Abstract([], False, version)
    if knows_first:  # None: the row left the table after the entry was read
        return None if found[4] is None else Abstract([row_of(found[4:])], False, version)
    if not walks:
        return None
    return Abstract(walked_abstract(conn, names, variant, embeddings), True, version)


@functools.lru_cache(maxsize=256)
def _abstract_statement(table: str, embeddings: bool) -> bytes:
    names = Names(table)
    return sql.SQL(
        """SELECT e.abstract_known, e.abstract_witness IS NOT NULL,
               (e.listed AND e.complete) OR e.abstract_first IS NOT NULL,
               (SELECT content_version FROM {m}), {cols}
        FROM {terms} e LEFT JOIN LATERAL (
            SELECT * FROM {t} c WHERE e.abstract_witness IS NOT NULL AND c.chunk_index = 0
                AND (c.chunk_id = e.abstract_first OR (e.listed AND e.complete
                     AND c.chunk_id = ANY(e.ids)))
            ORDER BY c.seq LIMIT 1) c ON true
        WHERE e.kind = %s AND e.recipe = %s AND e.model_id = %s AND e.text = %s AND {valid}"""
    ).format(cols=row_columns(embeddings), terms=schema.terms_table(names), t=names.ident(),
             m=names.meta, valid=schema.valid_condition(names)).as_bytes(None)  # fmt: skip


#: Abstract chunks walked in insertion order before the holders are collected instead: a
#: variant held by more chunks than an entry keeps is usually met within them.
WALKED_ROWS = 1000


def walked_abstract(conn: psycopg.Connection, names: Names, variant: str,
                    embeddings: bool) -> list[Row]:  # fmt: skip
    """The first abstract holding `variant` in insertion order (one is known to exist): the
    first WALKED_ROWS abstracts walked along the seq index, and only if none of them holds it,
    every holder collected through the trigram index (the second branch runs only then)."""
    statement = sql.SQL(
        """SELECT {cols} FROM (
            (SELECT w.chunk_id, w.seq FROM (SELECT c.chunk_id, c.seq, c.document FROM {t} c
                WHERE c.chunk_index = 0 ORDER BY c.seq LIMIT %s) w
             WHERE w.document LIKE %s ESCAPE '\\' ORDER BY w.seq LIMIT 1)
            UNION ALL
            (SELECT h.chunk_id, h.seq FROM (SELECT c.chunk_id, c.seq FROM {t} c
                WHERE c.chunk_index = 0 AND c.document LIKE %s ESCAPE '\\' OFFSET 0) h
             ORDER BY h.seq LIMIT 1)
            LIMIT 1) f JOIN {t} c ON c.chunk_id = f.chunk_id"""
    ).format(cols=row_columns(embeddings), t=names.ident())
    pattern = like_pattern(variant)
    return [row_of(r) for r in conn.execute(statement, [WALKED_ROWS, pattern, pattern])]
