"""The term cache's read side: keyword, entity and grounding answers by text, kept across
requests and processes in the table's `_terms` table, computed on a miss (compute.py) and
kept (keep.py) when nothing was written meanwhile."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from candlefire_pipeline.backends.base import ResultRow
from candlefire_pipeline.backends.pg.terms import compute, keep, schema
from candlefire_pipeline.backends.pg.terms.compute import ContentMoved
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD
from candlefire_pipeline.backends.pg.terms.lookup import Found, Key, lookup

log = logging.getLogger(__name__)

#: Seconds between flushes of the entries' use counts (they order eviction; not correctness).
FLUSH_SECONDS = 60.0
WALKS = ("auto", "off")
#: Seconds between checks for a cache table that did not exist yet.
RECHECK_SECONDS = 30.0
#: Computations of a miss started again when a write lands between their statements.
RETRIES = 3


@dataclass(frozen=True)
class CacheParams:
    """How the pgvector store keeps term answers (the app maps CANDLEFIRE_TERM_CACHE_*).

    enabled: read and keep entries (off: every answer computed, nothing kept); max_entries:
    entries kept, least recently used evicted beyond; depth: chunks kept per entry (a request
    reads the first 18); fill_ef: hnsw.ef_search of the walk that makes a missing entity name's
    entry; keyword_walk: "auto" walks the HNSW graph with the substring as filter for a variant
    held by more than sqrt(depth x rows) chunks (exact ranking below), "off" ranks every holder;
    phrase_index: build the phrase index after writes and probe through it (backends/pg/phrase).
    """

    enabled: bool = True
    max_entries: int = 50_000
    depth: int = 40
    fill_ef: int = 1000
    keyword_walk: str = "auto"
    phrase_index: bool = True

    def __post_init__(self) -> None:
        if self.keyword_walk not in WALKS:
            raise ValueError(f"keyword_walk must be one of {WALKS}, got {self.keyword_walk!r}")
        if self.depth < 1 or self.max_entries < 1 or self.fill_ef < 1:
            raise ValueError(f"term cache bounds must be positive, got {self}")


@dataclass
class CacheStats:
    """This process's counts: texts answered from the cache or computed (per kind), kept."""

    #: kind -> [texts answered from the cache, texts computed]
    by_kind: dict[str, list[int]] = field(default_factory=lambda: {KEYWORD: [0, 0], ENTITY: [0, 0]})
    kept: int = 0
    not_kept: int = 0

    @property
    def hits(self) -> int:
        return sum(answered for answered, _ in self.by_kind.values())

    @property
    def misses(self) -> int:
        return sum(computed for _, computed in self.by_kind.values())

    @property
    def hit_rate(self) -> float:
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0


class TermCache:
    """Keyword, entity and grounding answers of one pgvector store, by text."""

    def __init__(self, store, params: CacheParams) -> None:
        self.store, self.params = store, params
        self.stats = CacheStats()
        self._uses: dict[int, int] = {}
        self._flushed = time.monotonic()
        self._writable = True
        self._exists, self._checked = False, float("-inf")
        self._denied = False  # the role may not read the cache table
        #: computed keyword lists also name their first abstract holder in insertion order (the
        #: collection sets it: its table has `seq`; the reader never asks for it)
        self.first_abstracts = False

    # keys -----------------------------------------------------------------------------------
    def key(self, kind: str) -> Key:
        """What this cache keeps `kind` entries under (its recipe: how they are made)."""
        model_id = self.store.model()[0]
        if kind == KEYWORD:
            recipe = f"{self.store.substring_mode};walk={self.params.keyword_walk}"
        else:
            recipe = f"ef={self.params.fill_ef};exact<={self.store.ann.full_scan_rows}"
        return Key(kind, recipe, model_id)

    def _found(self, kind: str, texts, n: int, vectors=None) -> list[Found | None]:
        if not self.usable():
            return [None] * len(texts)
        listed = None if vectors is None else list(vectors)
        try:
            return lookup(self.store.conn, self.store.names, self.key(kind), texts, n, listed)
        except psycopg.errors.UndefinedTable:  # the store was reset by another process
            self.forget_schema()
        except psycopg.errors.InsufficientPrivilege as exc:
            self._denied = True
            log.warning("term cache: this role may not read it (%s); every answer is computed"
                        " (grant it with `candlefire create-reader-role`)",
                        str(exc).strip().splitlines()[0])  # fmt: skip
        return [None] * len(texts)

    def usable(self) -> bool:
        """Whether the cache is on and its table exists: checked once, and again at most every
        RECHECK_SECONDS while missing (the writer makes it on the table's next write)."""
        if not self.params.enabled or self._denied:
            return False
        now = time.monotonic()
        if not self._exists and now - self._checked >= RECHECK_SECONDS:
            self._exists = schema.exists(self.store.conn, self.store.names)
            self._checked = now
        return self._exists

    @property
    def keeps(self) -> bool:
        """Whether a computed answer can be kept (False once this connection could not)."""
        return self._writable

    def forget_schema(self) -> None:
        """The table was dropped (reset): check again before the next use."""
        self._exists, self._checked = False, float("-inf")

    # read side ------------------------------------------------------------------------------
    def entity_candidates(
        self, texts: Sequence[str], vectors: np.ndarray, n: int
    ) -> list[list[ResultRow]]:
        """Per name, the n chunks most similar to its vector (the entity stage)."""
        return self._candidates(ENTITY, texts, vectors, n, self._entities)

    def keyword_candidates(
        self, variants: Sequence[str], vectors: np.ndarray, n: int
    ) -> list[list[ResultRow]]:
        """Per variant, the n chunks holding it most similar to its own vector."""
        return self._candidates(KEYWORD, variants, vectors, n, self._keywords)

    def _candidates(self, kind, texts, vectors, n, compute) -> list[list[ResultRow]]:
        # one lookup per distinct (text, vector): a text asked with two vectors is two queries
        slots: dict[tuple[str, bytes], int] = {}
        for i, text in enumerate(texts):
            slots.setdefault((text, np.asarray(vectors[i], dtype=np.float32).tobytes()), i)
        first = list(slots.values())
        found = self._found(kind, [texts[i] for i in first], n, vectors[first])
        missing = [i for i, f in zip(first, found, strict=True) if not _answers(f, n)]
        made: list[list[ResultRow]] = []
        for attempt in range(RETRIES):
            try:
                if missing:
                    made = compute([texts[i] for i in missing], vectors[missing], n)
                break
            except ContentMoved:  # a write landed between two statements of the computation
                if attempt == RETRIES - 1:
                    raise
        answer = {i: f.rows for i, f in zip(first, found, strict=True) if _answers(f, n)}
        self._count(kind, hits=len(answer), misses=len(missing))
        self._note_uses(f.entry.id for f in found if _answers(f, n))
        answer |= dict(zip(missing, made, strict=True))
        return [
            answer[slots[(t, np.asarray(vectors[i], dtype=np.float32).tobytes())]][:n]
            for i, t in enumerate(texts)
        ]

    def grounding(self, variants: Sequence[str]) -> dict[str, tuple[bool, bool]]:
        """variant -> (held by some chunk, held by some abstract chunk)."""
        variants = list(dict.fromkeys(variants))
        found = self._found(KEYWORD, variants, 0)
        known = {
            v: (f.entry.corpus, f.entry.abstract)
            for v, f in zip(variants, found, strict=True)
            if f is not None and f.entry.grounded
        }
        missing = [v for v in dict.fromkeys(variants) if v not in known]
        self._count(KEYWORD, hits=len(set(variants)) - len(missing), misses=len(missing))
        self._note_uses(f.entry.id for v, f in zip(variants, found, strict=True) if v in known)
        if missing:
            known |= self._ground(missing)
        return {v: known[v] for v in variants}

    # cold path ------------------------------------------------------------------------------
    def _version(self) -> int | None:
        """The content version before a computation (None: no cache to keep answers in)."""
        store = self.store
        if not self.usable():
            return None
        return schema.versions(store.conn, store.names)[0]

    def _entities(self, texts: list[str], vectors: np.ndarray, n: int) -> list[list[ResultRow]]:
        version, depth = self._version(), max(self.params.depth, n)
        entries = compute.entity_entries(self.store, self.params.fill_ef, texts, vectors, depth)
        rows = compute.result_rows(self.store, entries, n)
        self._keep(ENTITY, list(zip(entries, vectors, strict=True)), version)
        return rows

    def _keywords(self, variants: list[str], vectors: np.ndarray, n: int) -> list[list]:
        version, depth = self._version(), max(self.params.depth, n)
        walks = self.params.keyword_walk == "auto"
        entries = compute.keyword_entries(
            self.store, self.params.fill_ef, walks, variants, vectors, depth, self.first_abstracts
        )
        rows = compute.result_rows(self.store, entries, n)
        self._keep(KEYWORD, list(zip(entries, vectors, strict=True)), version)
        return rows

    def _ground(self, variants: list[str]) -> dict[str, tuple[bool, bool]]:
        version = self._version()
        entries = compute.grounding_entries(self.store, variants)
        self._keep(KEYWORD, [(e, None) for e in entries], version)
        return {e.text: (e.corpus, e.abstract) for e in entries}

    # keeping --------------------------------------------------------------------------------
    def _keep(self, kind: str, entries: list, version: int | None) -> None:
        store = self.store
        if version is None or not self._writable:
            self.stats.not_kept += len(entries)
            return
        try:
            kept = keep.keep(store.conn, store.names, self.key(kind), entries, version,
                             self.params.max_entries)  # fmt: skip
        except keep.ReadOnlyCache as exc:
            self._writable = False
            log.warning("term cache: this connection cannot keep answers (%s); misses are "
                        "computed every time", exc)  # fmt: skip
            kept = False
        if kept:
            self.stats.kept += len(entries)
        else:
            self.stats.not_kept += len(entries)

    def keep_first(self, variant: str, chunk_id: str, version: int) -> None:
        """Keep v's first abstract holder in insertion order, found at content `version`."""
        if not self._writable:
            return
        try:
            keep.keep_first(self.store.conn, self.store.names, self.key(KEYWORD), variant,
                            chunk_id, version)  # fmt: skip
        except keep.ReadOnlyCache as exc:
            self._writable = False
            log.warning("term cache: this connection cannot keep answers (%s)", exc)

    def _count(self, kind: str, hits: int, misses: int) -> None:
        self.stats.by_kind[kind][0] += hits
        self.stats.by_kind[kind][1] += misses

    def _note_uses(self, ids) -> None:
        for entry_id in ids:
            if entry_id is not None:
                self._uses[entry_id] = self._uses.get(entry_id, 0) + 1
        if self._uses and time.monotonic() - self._flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write this process's use counts (eviction reads them); skipped while it must wait."""
        if not self._uses or not self._writable:
            self._uses.clear()
            return
        try:
            done = keep.flush_uses(self.store.conn, self.store.names, self._uses)
        except keep.ReadOnlyCache:
            self._writable, done = False, True
        except psycopg.errors.UndefinedTable:  # the store was reset meanwhile
            done = True
        if done:
            self._uses.clear()
            self._flushed = time.monotonic()


def _answers(found: Found | None, n: int) -> bool:
    return found is not None and found.answers(n)
