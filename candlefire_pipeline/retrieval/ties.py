"""One order for candidate rows on every store: near-equal similarities are ties, broken by id.

Stores compute the same cosine in float32 with their own summation order, so one chunk's
similarity differs between stores by up to 3e-7 (measured on the demo corpus: pgvector 1.8e-7,
Chroma 3.0e-7, Qdrant 1.4e-7 against the exact oracle). Rounding to a grid does not absorb that:
a tie that straddles a grid line still orders differently (the flake this module replaced).
Instead, neighbours in similarity order closer than TIE_TOLERANCE form one tie group, ordered by
(pmid, chunk_id); a real gap of 3e-6 or more still orders by similarity.

A store cuts its top-k among tied chunks as it likes, so the retriever fetches TIE_MARGIN more
than it keeps, and a tie group that reaches both the cut and the end of what the store returned
(so it may go on in the store) is left out whole rather than cut by the store's whim.
"""

from __future__ import annotations

from collections.abc import Iterable

#: 10x the largest cross-store difference measured for one chunk (3e-7, float32 cosine).
TIE_TOLERANCE = 3e-6
#: Candidates fetched beyond the cut so a tie group at the cut is seen whole.
TIE_MARGIN = 8


def _similarity(row: dict) -> float:
    value = row.get("similarity")
    return float("-inf") if value is None else float(value)


def tie_groups(rows: Iterable[dict]) -> list[list[dict]]:
    """Rows most similar first, in groups of chained near-equal similarity, each by id."""
    ordered = sorted(rows, key=_similarity, reverse=True)
    groups: list[list[dict]] = []
    previous = None
    for row in ordered:
        similarity = _similarity(row)
        if previous is None or previous - similarity > TIE_TOLERANCE:
            groups.append([])
        groups[-1].append(row)
        previous = similarity
    return [sorted(group, key=lambda row: (row["pmid"], row["chunk_id"])) for group in groups]


def canonical_order(rows: Iterable[dict]) -> list[dict]:
    """Rows most similar first, near-ties by (pmid, chunk_id): the same on every store."""
    return [row for group in tie_groups(rows) for row in group]


def canonical_top(rows: list[dict], keep: int, asked: int) -> list[dict]:
    """The first `keep` rows in canonical order of a store's answer to a top-`asked` request.

    When the store returned all it was asked for, its last tie group may go on beyond what it
    returned; if that group also reaches into the first `keep`, it is left out whole (unless it
    is all there is), so the answer never depends on which tied chunks a store picked.
    """
    groups = tie_groups(rows)
    if len(rows) >= asked and len(groups) > 1:
        start = len(rows) - len(groups[-1])
        if start < keep:
            groups = groups[:-1]
    return [row for group in groups for row in group][:keep]


def best_per_pmid(rows: Iterable[dict]) -> list[dict]:
    """The best row of each PMID in canonical order (a near-tie within a paper: lowest chunk_id)."""
    best: dict[str, dict] = {}
    for row in canonical_order(rows):
        best.setdefault(row["pmid"], row)
    return list(best.values())
