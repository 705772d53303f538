"""Backend-independent ranking on result dicts: RRF fusion, recency and citation boost.

Result dicts are backends.base.ResultRow plus score keys added along the way
(rrf_score, rerank_score, final_score). Every function returns new dicts and never
mutates its input, so one candidate list can feed several rankings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from candlefire_pipeline.retrieval.ties import TIE_TOLERANCE
from candlefire_pipeline.settings import RetrievalSettings as _R


def _similarity_key(row: dict) -> float:
    similarity = row.get("similarity")
    return -math.inf if similarity is None else similarity


def rrf_merge(
    lists: Sequence[Iterable[dict]], k: int = _R.rrf_k, top: int = _R.rrf_top
) -> list[dict]:
    """Reciprocal-rank fusion exactly as candle-fire computes it: score(pmid) = sum over lists of
    1 / (k + rank + 1), rank 0-based, added up in list order; the best `top`, rrf_score rounded
    to 6 decimals (the order uses the unrounded sums).

    A PMID counts once per list, at its best (first) rank there (candle-fire's lists hold each
    PMID once). The dict kept for a PMID is its most similar one across lists; a similarity
    within TIE_TOLERANCE of the kept one does not replace it, so stores that differ only by
    float noise keep the same dict. Equal scores keep the order of first appearance, scanning
    the lists in order and each list top-down (Python's sort is stable).
    """
    if k < 0 or top < 0:
        raise ValueError(f"rrf_merge needs k >= 0 and top >= 0, got k={k}, top={top}")
    scores: dict[str, float] = {}
    best: dict[str, dict] = {}
    for ranked in lists:
        seen_here: set[str] = set()
        for rank, row in enumerate(ranked):
            pmid = row["pmid"]
            if pmid in seen_here:
                continue
            seen_here.add(pmid)
            scores[pmid] = scores.get(pmid, 0.0) + 1.0 / (k + rank + 1)
            if (
                pmid not in best
                or _similarity_key(row) > _similarity_key(best[pmid]) + TIE_TOLERANCE
            ):
                best[pmid] = row
    order = sorted(scores, key=lambda pmid: scores[pmid], reverse=True)[:top]
    return [{**best[pmid], "rrf_score": round(scores[pmid], 6)} for pmid in order]


def recency_factor(
    year: int | None,
    start: int = _R.recency_start_year,
    end: int = _R.recency_end_year,
    end_factor: float = _R.recency_end_factor,
) -> float:
    """1.0 up to `start`, `end_factor` at `end`, linear and NOT capped: later years keep rising.

    candle-fire's rule: 2026 gets 1.514 with the defaults. A missing year (None, or 0 as some
    corpora write it) counts as `start`, so it gets 1.0.
    """
    if end <= start:
        raise ValueError(f"recency window must have end > start, got {start}..{end}")
    if not year:
        year = start
    return 1.0 + (end_factor - 1.0) * max(0, year - start) / (end - start)


def apply_citation_boost(
    results: Iterable[dict],
    start: int = _R.recency_start_year,
    end: int = _R.recency_end_year,
    end_factor: float = _R.recency_end_factor,
) -> list[dict]:
    """final_score = rerank_score x ln(citation_count + 2) x recency factor; best first, stable.

    Each row needs a rerank_score (see rerank.rerank). A missing citation_count counts as 0.
    """
    boosted = []
    for row in results:
        if row.get("rerank_score") is None:
            raise ValueError(f"row {row.get('chunk_id')!r} has no rerank_score to boost")
        citations = row.get("citation_count") or 0
        if citations < 0:
            raise ValueError(f"row {row.get('chunk_id')!r} has citation_count {citations} < 0")
        factor = recency_factor(row.get("year"), start, end, end_factor)
        final = row["rerank_score"] * math.log(citations + 2) * factor
        boosted.append({**row, "final_score": final})
    return sorted(boosted, key=lambda row: -row["final_score"])
