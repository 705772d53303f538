"""A small random sample of the table's documents, to tell a keyword variant held by many
chunks from one held by few before any index is read.

A variant held by many chunks is walked (compute.py); probing it first through the trigram
index costs what its trigrams' posting lists hold, which grows with the table (at 1M chunks a
common word's probe read ~320k index entries and ~6k heap pages). Counting the variant in a fixed
number of sampled documents costs the same at any size. The sample only routes a variant: an
estimate that is wrong costs time, never exactness (a probe that finds more holders than the
threshold still walks; a walk that ends short is answered exactly).
"""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import matching

#: Documents sampled: a variant past the walk threshold (~0.6% of 1M chunks) shows ~6 times.
SIZE = 1000
#: Fewer sampled holders than this never routes a variant to the walk (noise on small tables).
MIN_SEEN = 3
#: The sample is taken again when the table grew or shrank by this share, or is this old.
DRIFT, MAX_AGE = 0.1, 3600.0


class DocumentSample:
    """Sampled documents of one table, taken again as it changes (per reader process)."""

    def __init__(self) -> None:
        self._documents: list[str] = []
        self._rows = 0
        self._taken = float("-inf")

    def frequent(self, conn, names: Names, mode: str, variants, rows: int, threshold: int):
        """Per variant: whether the sample says more than `threshold` chunks hold it."""
        documents = self._current(conn, names, rows)
        if not documents:
            return [False] * len(variants)
        seen = _holders(documents, variants, mode)
        return [count >= MIN_SEEN and count * rows / len(documents) > threshold for count in seen]

    def _current(self, conn, names: Names, rows: int) -> list[str]:
        stale = abs(rows - self._rows) > DRIFT * max(self._rows, 1)
        if stale or time.monotonic() - self._taken > MAX_AGE:
            self._documents, self._rows = _sample(conn, names, rows), rows
            self._taken = time.monotonic()
        return self._documents


def _sample(conn: psycopg.Connection, names: Names, rows: int) -> list[str]:
    """About SIZE documents from random pages (TABLESAMPLE SYSTEM reads only those pages)."""
    if rows <= 0:
        return []
    percent = min(100.0, 100.0 * SIZE / rows)
    query = sql.SQL("SELECT document FROM {t} TABLESAMPLE SYSTEM (%s) LIMIT %s").format(
        t=names.ident()
    )
    return [row[0] for row in conn.execute(query, [percent, 2 * SIZE])]


def _holders(documents: list[str], variants, mode: str) -> list[int]:
    """How many documents hold each variant (as LIKE / ILIKE would find it), one pass each."""
    fold = matching.folding(mode)
    matcher = matching.automaton(list(enumerate(variants)), fold)
    counts = [0] * len(variants)
    for document in documents:
        for i in matching.held(matcher, document, fold):
            counts[i] += 1
    return counts
