"""A kept term answer and the pure rules that keep it exact while chunks come and go.

An entry's list is the exact top of its candidates in (distance, chunk_id) order: every chunk
it leaves out is further than its last member (or equally far with a larger id). So a write can
keep it exact without looking at the corpus again:

- a deleted member leaves the list shorter, still the exact top of what remains;
- a new candidate (a new chunk holding the variant, or any new chunk for an entity name) enters
  when it sorts before the last member (what lay beyond that member is unknown, so nothing is
  placed after it). A `complete` list holds every candidate, so every new one enters (up to the
  cap).

Keyword entries also answer grounding: `witness` is a chunk holding the variant and
`abstract_witness` one of its abstract chunks (chunk_index 0); a known None means there is none.
A deleted witness is replaced from the list when it can be, else the fact becomes unknown and
the next read computes it again.

`abstract_first` is the first abstract holder in insertion order (the table's `seq`): the answer
of the app's grounding-in-an-abstract `get`. A new chunk is numbered after every row, so it never
precedes it; only a chunk re-inserted in the transaction that deleted it takes its old place back
(insertion_order.py), so such a candidate, or the first holder's deletion, makes it unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

KEYWORD, ENTITY = "keyword", "entity"
KINDS = (KEYWORD, ENTITY)


@dataclass(frozen=True)
class Entry:
    """One kept answer: a text's ranked chunks and, for a keyword variant, its grounding."""

    kind: str
    text: str
    #: holds a ranked list (a keyword entry made by a grounding lookup has none)
    listed: bool = False
    ids: tuple[str, ...] = ()
    distances: tuple[float, ...] = ()
    #: the list holds every candidate (a variant held by fewer chunks than the list's length)
    complete: bool = False
    #: the list was made by an approximate walk (a variant held by many chunks, an HNSW walk)
    approximate: bool = False
    witness: str | None = None
    witness_known: bool = False
    abstract_witness: str | None = None
    abstract_known: bool = False
    #: the first abstract holder in insertion order (None: unknown, or no abstract holds it)
    abstract_first: str | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"entry kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.ids) != len(self.distances):
            raise ValueError("an entry needs one distance per listed chunk")

    def answers(self, n: int) -> bool:
        """Whether the list can give the exact top n (it is long enough, or holds them all)."""
        return self.listed and (self.complete or len(self.ids) >= n)

    @property
    def corpus(self) -> bool | None:
        """Whether some chunk holds the variant (None: unknown)."""
        return (self.witness is not None) if self.witness_known else None

    @property
    def abstract(self) -> bool | None:
        """Whether some abstract chunk holds the variant (None: unknown)."""
        return (self.abstract_witness is not None) if self.abstract_known else None

    @property
    def grounded(self) -> bool:
        """Both grounding facts are known."""
        return self.witness_known and self.abstract_known


@dataclass(frozen=True)
class Candidate:
    """A chunk written in this transaction that an entry must consider."""

    chunk_id: str
    #: None: sorts after the last member of the entry's list (or the entry has none)
    distance: float | None
    abstract: bool  # chunk_index == 0
    #: deleted by this same write and written again: it keeps its old place in insertion order
    carried: bool = False


def without(entry: Entry, deleted: set[str]) -> Entry:
    """The entry after these chunks were deleted."""
    witnesses = {entry.witness, entry.abstract_witness, entry.abstract_first}
    if deleted.isdisjoint(entry.ids) and not witnesses & deleted:
        return entry
    kept = [(i, d) for i, d in zip(entry.ids, entry.distances, strict=True) if i not in deleted]
    ids = tuple(i for i, _ in kept)
    out = replace(entry, ids=ids, distances=tuple(d for _, d in kept))
    if entry.witness in deleted:
        if entry.listed and ids:
            out = replace(out, witness=ids[0], witness_known=True)
        else:
            out = replace(out, witness=None, witness_known=entry.listed and entry.complete)
    if entry.abstract_witness in deleted:
        # which remaining member is an abstract is not kept: the next read computes it again
        out = replace(out, abstract_witness=None, abstract_known=False)
    if entry.abstract_first in deleted:
        out = replace(out, abstract_first=None)
    return out


def with_candidates(entry: Entry, candidates: Iterable[Candidate], cap: int) -> Entry:
    """The entry after these chunks were written (each a candidate of it)."""
    candidates = list(candidates)
    if not candidates:
        return entry
    out = entry
    if entry.kind == KEYWORD:
        out = _witnessed(out, candidates)
    if entry.listed:
        out = _ranked(out, candidates, cap)
    return out


def _witnessed(entry: Entry, candidates: list[Candidate]) -> Entry:
    first = min(candidates, key=lambda c: c.chunk_id)
    if entry.witness is None:
        entry = replace(entry, witness=first.chunk_id, witness_known=True)
    abstracts = sorted(c.chunk_id for c in candidates if c.abstract)
    if abstracts and entry.abstract_witness is None:
        entry = replace(entry, abstract_witness=abstracts[0], abstract_known=True)
    if entry.abstract_first is not None and any(c.abstract and c.carried for c in candidates):
        entry = replace(entry, abstract_first=None)  # it may now precede the first holder
    return entry


def _ranked(entry: Entry, candidates: list[Candidate], cap: int) -> Entry:
    if entry.complete and any(c.distance is None for c in candidates):
        raise ValueError(f"a candidate of the complete entry {entry.text!r} has no distance")
    candidates = [c for c in candidates if c.distance is not None]
    if not candidates:
        return entry
    fresh = {c.chunk_id for c in candidates}
    kept = [(d, i) for i, d in zip(entry.ids, entry.distances, strict=True) if i not in fresh]
    merged = sorted(kept + [(float(c.distance), c.chunk_id) for c in candidates], key=order_key)
    bound = max(cap, len(entry.ids))
    if entry.complete:
        keep = min(len(merged), bound)
        complete = len(merged) <= keep
    else:
        # exact up to the last kept member: what the list never held sorts after it
        frontier = order_key(kept[-1]) if kept else None
        keep = 0 if frontier is None else sum(order_key(p) <= frontier for p in merged)
        keep, complete = min(keep, bound), False
    merged = merged[:keep]
    return replace(
        entry,
        ids=tuple(i for _, i in merged),
        distances=tuple(d for d, _ in merged),
        complete=complete,
    )


def order_key(pair: tuple[float, str]) -> tuple[float, str]:
    """(distance, chunk_id) in the store's order, ids compared as bytes (COLLATE "C"): Python
    compares strings by code point, which is the order of their UTF-8 bytes, so the pair is its
    own key (no encoding per comparison)."""
    return pair
