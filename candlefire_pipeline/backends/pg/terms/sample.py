"""A small random sample of the table's documents, to tell a keyword variant held by many
chunks from one held by few before any index is read.

A variant held by many chunks is walked (compute.py); probing it first through the trigram
index costs what its trigrams' posting lists hold, which grows with the table (at 1M chunks a
common word's probe read ~320k index entries and ~6k heap pages). Counting the variant in a fixed
number of sampled documents costs the same at any size. The same documents tell which index a
probe should read: a phrase whose inner words are rare goes through the word index (words.py),
one whose inner words are common (or that has none) through the trigram index. The sample only
routes a variant: an estimate that is wrong costs time, never exactness (a probe that finds more
holders than the threshold still walks; a walk that ends short is answered exactly; either
index finds every holder).
"""

from __future__ import annotations

import time
from collections import defaultdict

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg import words
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import matching

#: Documents sampled: a variant past the walk threshold (~0.6% of 1M chunks) shows ~6 times.
SIZE = 1000
#: Fewer sampled holders than this never routes a variant to the walk (noise on small tables).
MIN_SEEN = 3
#: The sample is taken again when the table grew or shrank by this share, or is this old.
DRIFT, MAX_AGE = 0.1, 3600.0
#: A probe reads the word index when at most this share of the sample holds every inner word
#: of the variant (at 1M chunks: ~10k documents to recheck, against ~48k for the trigrams of
#: a phrase of common words; a common inner word alone would be worse than the trigrams).
WORD_SHARE = 0.01


class DocumentSample:
    """Sampled documents of one table, taken again as it changes (per reader process)."""

    def __init__(self) -> None:
        self._documents: list[str] = []
        self._words: dict[str, set[int]] = {}  # word -> the sampled documents holding it
        self._indexed: bool | None = None  # the table has the word index (None: not asked)
        self._rows = 0
        self._taken = float("-inf")

    def word_filters(self, conn, names: Names, mode: str, variants, rows: int):
        """Per variant: the inner words a probe should find it by (words.py), or None for
        the trigram index."""
        self._current(conn, names, rows)
        if mode != "like" or not self._documents:
            return [None] * len(variants)  # no evidence: the trigram index, as always
        if self._indexed is None:  # checked again with each sample (a writer may add it)
            self._indexed = words.has_index(conn, names)
        if not self._indexed:
            return [None] * len(variants)
        bound = WORD_SHARE * len(self._documents)
        out = []
        for variant in variants:
            inner = words.inner_words(variant)
            out.append(inner if inner and self._holding_all(inner) <= bound else None)
        return out

    def _holding_all(self, inner: list[str]) -> int:
        """Sampled documents holding every one of these words."""
        postings = sorted((self._words.get(w, set()) for w in inner), key=len)
        return len(postings[0].intersection(*postings[1:]))

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
            self._words = _postings(self._documents)
            self._indexed = None
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


def _postings(documents: list[str]) -> dict[str, set[int]]:
    """Word -> the indexes of the documents holding it (as the word index keeps words)."""
    out: dict[str, set[int]] = defaultdict(set)
    for index, document in enumerate(documents):
        for word in words.document_words(document):
            out[word].add(index)
    return dict(out)


def _holders(documents: list[str], variants, mode: str) -> list[int]:
    """How many documents hold each variant (as LIKE / ILIKE would find it), one pass each."""
    fold = matching.folding(mode)
    matcher = matching.automaton(list(enumerate(variants)), fold)
    counts = [0] * len(variants)
    for document in documents:
        for i in matching.held(matcher, document, fold):
            counts[i] += 1
    return counts
