"""The app's last step around the retriever: the grounding gate and landscape-only papers.

- If the query has focus terms and none of them is written in any chunk, the app cites no paper
  (semantic neighbours of an absent drug code would only invite grafted citations).
- A focus term written in the corpus but in no abstract (a compound named only in full-text
  pipeline tables) gets its first keyword hits appended when they are not cited already.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from candlefire_pipeline.backends.base import ResultRow
from candlefire_pipeline.retrieval.query_plan import QueryPlan
from candlefire_pipeline.retrieval.stages import keyword_stage

#: Keyword hits of landscape-only focus terms appended to the cited papers (candle-fire's).
LANDSCAPE_HITS = 5


@dataclass(frozen=True)
class Citations:
    """The papers the app cites and why."""

    papers: list[dict]
    grounded_terms: tuple[str, ...]
    landscape_terms: tuple[str, ...]
    injected_pmids: tuple[str, ...]
    #: focus terms were asked for and none is written in the corpus: no paper is cited
    evidence_ungrounded: bool


def cite(
    plan: QueryPlan,
    grounding: Mapping[str, Mapping[str, bool]],
    ranked: list[dict],
    hits_by_variant: Mapping[str, list[ResultRow]],
    landscape_hits: int = LANDSCAPE_HITS,
) -> Citations:
    """The papers the app cites for a ranked list, given the grounding of the plan's terms."""
    grounded = tuple(t for t in plan.focus_terms if grounding[t]["corpus"])
    ungrounded = bool(plan.focus_terms) and not grounded
    papers = [] if ungrounded else list(ranked)
    landscape = tuple(t for t in grounded if not grounding[t]["abstract"])
    injected: list[str] = []
    if not ungrounded and landscape:
        present = {row["pmid"] for row in papers}
        variants = dict.fromkeys(v for term in landscape for v in plan.variants[term])
        for row in keyword_stage(hits_by_variant, variants)[:landscape_hits]:
            if row["pmid"] not in present:
                papers.append({**row, "injected": True})
                present.add(row["pmid"])
                injected.append(row["pmid"])
    return Citations(papers, grounded, landscape, tuple(injected), ungrounded)
