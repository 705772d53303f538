"""A small random sample of the table's documents, to tell a keyword variant held by many
chunks from one held by few before any index is read, and which index finds its holders for
less (phrase.py).

A variant held by many chunks is walked (compute.py); probing it first through the trigram
index costs what its trigrams' posting lists hold, which grows with the table (at 1M chunks a
common word's probe read ~320k index entries and ~6k heap pages). Counting the variant in a fixed
number of sampled documents costs the same at any size. The sample only routes a variant: an
estimate that is wrong costs time, never exactness (a probe that finds more holders than the
threshold still walks; a walk that ends short is answered exactly).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.phrase import key_text, python_query_keys
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
        return [e.frequent(threshold) for e in self.estimates(conn, names, mode, variants, rows)]

    def estimates(
        self, conn, names: Names, mode: str, variants, rows: int, routes: bool = True
    ) -> list[Estimate]:
        """Per variant: its holders, and (`routes`) the candidates each index would check."""
        documents = self._current(conn, names, rows)
        if not documents:
            return [Estimate(0, 0, 0, 0, routes and bool(python_query_keys(v))) for v in variants]
        return _estimates(documents, variants, mode, rows, routes)

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


#: What reading one posting of an index costs against checking one candidate row (its heap
#: tuple read, the substring matched): an index whose keys are common reads long posting lists.
POSTING_SHARE = 1 / 50
#: A candidate of the phrase index costs more than one of the trigram index (measured at 1M
#: chunks, 2026-12-04: ~2x per estimated candidate; the substring is matched on a copy).
PHRASE_ROW_COST = 1.5


@dataclass(frozen=True)
class Estimate:
    """One variant in the sample, scaled to the table: its holders, and what finding them costs
    through each index (in candidate rows: the candidates to check, plus the postings read)."""

    seen: int
    holders: float
    phrase: float
    trigram: float
    keyed: bool

    def frequent(self, threshold: int) -> bool:
        return self.seen >= MIN_SEEN and self.holders > threshold

    @property
    def by_phrase(self) -> bool:
        """The phrase index costs no more than the trigram index (two estimates of 0, a rare
        phrase, go to the phrase index: its keys are rarer than its words)."""
        return self.keyed and self.phrase * PHRASE_ROW_COST <= self.trigram


_WORD = re.compile(r"\w+")


def _estimates(
    documents: list[str], variants, mode: str, rows: int, routes: bool = True
) -> list[Estimate]:
    """One Aho-Corasick pass over the sample: each variant and, when routing, its phrase keys
    and its words in any of three spellings (pg_trgm ignores case)."""
    fold = matching.folding(mode)
    needles: dict[str, int] = {}

    def ids(texts) -> list[int]:
        return [needles.setdefault(fold(t), len(needles)) for t in texts]

    plans = []
    for variant in variants:
        keys = python_query_keys(variant) if routes else []
        words = _WORD.findall(variant) if routes else []
        plans.append((
            ids([variant]), ids(key_text(k) for k in keys),
            [ids({w, w.lower(), w.capitalize()}) for w in words],
        ))  # fmt: skip
    matcher = matching.automaton([(i, t) for t, i in needles.items()], matching._same)
    found = np.zeros((len(documents), len(needles)), dtype=bool)
    for d, document in enumerate(documents):
        hits = list(matching.held(matcher, fold(document), matching._same))
        found[d, hits] = True
    scale = rows / len(documents)
    out = []
    for variant_ids, key_ids, word_ids in plans:
        seen = int(found[:, variant_ids[0]].sum())
        words = [found[:, spellings].any(axis=1) for spellings in word_ids]
        trigram = _cost(words, len(documents))
        phrase = _cost([found[:, k] for k in key_ids], len(documents)) if key_ids else trigram
        out.append(Estimate(seen, seen * scale, phrase * scale, trigram * scale, bool(key_ids)))
    return out


def _holders(documents: list[str], variants, mode: str) -> list[int]:
    """How many documents hold each variant (as LIKE / ILIKE would find it)."""
    return [e.seen for e in _estimates(documents, variants, mode, len(documents), routes=False)]


def _cost(columns: list[np.ndarray], documents: int) -> float:
    """Candidates (sampled documents holding every key) plus the keys' postings read."""
    if not columns:
        return float(documents)
    both = np.logical_and.reduce(columns)
    return float(both.sum()) + POSTING_SHARE * sum(float(c.sum()) for c in columns)
