"""One order for candidate rows on every store: near-equal similarities are ties, broken by id.

Stores compute the same cosine in float32 with their own summation order, so one chunk's
similarity differs between stores by up to 3e-7 (measured on the demo corpus: pgvector 1.8e-7,
Chroma 3.0e-7, Qdrant 1.4e-7 against the exact oracle). Rounding to a grid does not absorb that:
a tie that straddles a grid line still orders differently. Instead, neighbours in similarity
order closer than TIE_TOLERANCE form one tie group, ordered by (pmid, chunk_id); a real gap of
3e-6 or more still orders by similarity.

candle-fire orders by similarity alone (a stable sort), so on an exact tie its order is whatever
its store returned; the conformance fixtures allow rows within 1e-5 to swap for that reason, and
this order stays inside that allowance.

A store cuts its top-k among tied chunks as it likes. To keep exactly candle-fire's k rows, the
retriever asks for TIE_MARGIN more than it keeps, and when the tie group at the cut may go on
beyond what the store returned, it asks again for more (retrieval/fetch.py): the rows kept are
always the first k of the store's full answer in this order, never fewer.
"""

from __future__ import annotations

from collections.abc import Iterable

#: 10x the largest cross-store difference measured for one chunk (3e-7, float32 cosine).
TIE_TOLERANCE = 3e-6
#: Candidates fetched beyond the cut so a tie group at the cut is usually seen whole at once.
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


def cut_is_open(rows: list[dict], keep: int, asked: int) -> bool:
    """Whether the first `keep` rows of a store's answer to a top-`asked` request may depend on
    rows it did not return: it returned all it was asked for, and its last tie group (which may
    go on in the store) reaches into the first `keep`."""
    if len(rows) < asked or len(rows) <= keep:
        return False
    groups = tie_groups(rows)
    return len(rows) - len(groups[-1]) < keep


def best_per_pmid(rows: Iterable[dict]) -> list[dict]:
    """The best row of each PMID in canonical order (a near-tie within a paper: lowest chunk_id).

    candle-fire's "merge keeping the more similar row per PMID, then dedup by PMID" in one step.
    """
    best: dict[str, dict] = {}
    for row in canonical_order(rows):
        best.setdefault(row["pmid"], row)
    return list(best.values())
