"""Conformance: does the retriever, on a store, answer every recorded query as candle-fire did?

Each fixture query runs through `Retriever.retrieve` on the store (the fixture corpus loaded with
candle-fire's own vectors) and every recorded part is checked: the spelling variants, the keyword
terms, the grounding booleans, the three stage lists and the RRF top 20 (conformance/lists.py says
when two lists agree). The RRF function is also checked on candle-fire's own recorded lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain

import numpy as np

from candlefire_pipeline.parity.conformance.fixtures import (
    STAGES,
    ConformanceFixtures,
    FixtureQuery,
)
from candlefire_pipeline.parity.conformance.lists import (
    ListCheck,
    Pools,
    Row,
    Stage,
    compare_lists,
    explain_misses,
)
from candlefire_pipeline.retrieval.query_plan import QueryPlan
from candlefire_pipeline.retrieval.ranking import rrf_merge
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.retrieval.stages import merged
from candlefire_pipeline.retrieval.variants import term_variants

#: What a check can find: see check_stage.
VERDICTS = ("identical", "reference_miss", "store_miss", "differs")
#: Every check of one query, in report order.
CHECKS = ("variants", "keyword_terms", "grounding", *STAGES, "rrf_top20", "rrf_of_recording")
#: Candidates beyond a stage's cut kept per sub-query to explain the recording's misses.
EXPLAIN_DEPTH = 40


def _rows(rows: Sequence[dict], score: str = "similarity") -> list[Row]:
    return [(r["pmid"], r["chunk_id"], float(r[score])) for r in rows]


def _recorded(rows: Sequence[Sequence]) -> list[Row]:
    return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]


def _equal(ours: object, theirs: object, what: str) -> ListCheck:
    if ours == theirs:
        return ListCheck("identical")
    return ListCheck("differs", detail=f"{what}: ours {ours!r}, candle-fire {theirs!r}")


class ExactPools:
    """Deep exact candidate lists per sub-query, from an exact store holding the fixture corpus
    (the oracle), to explain where candle-fire's recording left true neighbours out."""

    def __init__(self, oracle: Retriever) -> None:
        self.oracle = oracle
        self.settings = oracle.settings

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.oracle.embed_texts(texts)
        return np.stack([vectors[t] for t in texts])

    def _tagged(self, keys: Sequence[str], lists: list[list[dict]]) -> dict[str, list[dict]]:
        return {
            key: [{**row, "source": key} for row in rows]
            for key, rows in zip(keys, lists, strict=True)
        }

    def stage(self, name: str, retrieval: Retrieval) -> tuple[Pools, Stage, int]:
        """(pools, the stage over pools, the cut of each pool) of one stage of one query."""
        plan, s, backend = retrieval.plan, self.settings, self.oracle.backend
        if name == "search":
            keys, cut, n = [plan.query], 2 * s.semantic_n, s.semantic_n
        elif name == "search_by_entities":
            keys, cut, n = list(plan.entity_names), s.entity_hits, s.entity_n
        else:
            keys, cut, n = plan.distinct_variants, s.keyword_hits, None
        lists: list[list[dict]] = []
        if keys and name == "search_by_keyword":
            lists = backend.substring_candidates(keys, self._vectors(keys), cut + EXPLAIN_DEPTH)
        elif keys:
            kind = "semantic" if name == "search" else "entities"
            lists = backend.semantic_candidates(
                self._vectors(keys), cut + EXPLAIN_DEPTH, stage=kind
            )
        pools = self._tagged(keys, lists)
        return pools, lambda p: merged([p[k][:cut] for k in keys], n), cut


def check_stage(
    name: str, retrieval: Retrieval, recorded: list[Row], exact: ExactPools | None
) -> ListCheck:
    """identical; reference_miss (the store answers exactly, candle-fire's recording lacks true
    neighbours); store_miss (the store's own index lacks true neighbours); or differs."""
    ours = _rows(getattr(retrieval, _STAGE_FIELDS[name]))
    check = compare_lists(ours, recorded)
    if check.verdict == "identical" or exact is None:
        return check
    pools, stage, cut = exact.stage(name, retrieval)
    if compare_lists(ours, _rows(stage(pools))).verdict != "identical":
        own = explain_misses(ours, pools, stage, cut)
        if own is not None:
            return ListCheck("store_miss", misses=own, detail=check.detail + "; the store's "
                             f"index missed {own} neighbours the exact search finds")  # fmt: skip
        return ListCheck("differs", detail=check.detail + "; the store's list is not the exact one")
    misses = explain_misses(recorded, pools, stage, cut)
    if misses is None:
        detail = check.detail + "; not explained by misses of the recording"
        return ListCheck("differs", detail=detail)
    return ListCheck("reference_miss", misses=misses, detail=check.detail)


_STAGE_FIELDS = {"search": "semantic", "search_by_entities": "entities",
                 "search_by_keyword": "keyword"}  # fmt: skip


def check_query(
    query: FixtureQuery, retrieval: Retrieval, expected: dict, exact: ExactPools | None
) -> dict[str, ListCheck]:
    """Every check of one recorded query against one retrieve() answer."""
    checks = {
        "variants": _equal(
            {t: term_variants(t) for t in expected["variants"]}, expected["variants"], "variants"
        ),
        "keyword_terms": _equal(
            list(retrieval.plan.keyword_terms), expected["keyword_terms"], "keyword terms"
        ),
        "grounding": _equal(
            {t: retrieval.grounding.get(t) for t in expected["grounding"]},
            expected["grounding"],
            "grounding",
        ),
    }
    for name in STAGES:
        checks[name] = check_stage(name, retrieval, _recorded(expected[name]), exact)
    rrf = [(pmid, pmid, float(score)) for pmid, score in expected["rrf_top20"]]
    checks["rrf_top20"] = compare_lists(_rows(retrieval.fused, "rrf_score"), rrf)
    if checks["rrf_top20"].verdict == "differs" and any(
        checks[name].verdict == "reference_miss" for name in STAGES
    ):
        checks["rrf_top20"] = ListCheck("reference_miss", detail="fused from a stage list the "
                                        "recording's store got wrong")  # fmt: skip
    checks["rrf_of_recording"] = _rrf_of_recording(expected, rrf)
    return checks


def _rrf_of_recording(expected: dict, rrf: list[Row]) -> ListCheck:
    """rrf_merge over candle-fire's own recorded lists must give its recorded RRF exactly."""
    lists = [
        [{"pmid": p, "chunk_id": c, "similarity": s} for p, c, s in expected[name]]
        for name in STAGES
    ]
    ours = [(r["pmid"], r["pmid"], r["rrf_score"]) for r in rrf_merge(lists, k=10, top=20)]
    return compare_lists(ours, rrf, tol=0.0)


@dataclass
class StoreConformance:
    """One store's conformance over a recorded query set."""

    store: str
    queries: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    swaps: int = 0
    misses: int = 0
    failures: list[dict] = field(default_factory=list)

    def add(self, query_id: str, checks: dict[str, ListCheck]) -> None:
        self.queries += 1
        for name, check in checks.items():
            tally = self.counts.setdefault(name, dict.fromkeys(VERDICTS, 0))
            tally[check.verdict] += 1
            self.swaps += check.swaps
            if check.verdict == "reference_miss":
                self.misses += check.misses
            if check.verdict in ("differs", "store_miss"):
                self.failures.append({"query_id": query_id, "check": name, "detail": check.detail})

    @property
    def differing(self) -> int:
        """Checks that are not candle-fire's answer: wrong semantics or the store's ANN misses."""
        return sum(tally["differs"] + tally["store_miss"] for tally in self.counts.values())

    def verdicts(self) -> dict[str, int]:
        """Every verdict summed over the checks."""
        return {v: sum(tally[v] for tally in self.counts.values()) for v in VERDICTS}

    @property
    def lists(self) -> int:
        return sum(sum(tally.values()) for tally in self.counts.values())

    @property
    def passed(self) -> bool:
        return self.queries > 0 and self.differing == 0

    def summary(self) -> str:
        """One line: lists identical, explained as the recording's misses, differing; swaps."""
        found = self.verdicts()
        return (
            f"{self.queries} queries, {self.lists} checks: {found['identical']} identical "
            f"({self.swaps} tie swaps), {found['reference_miss']} where candle-fire's store "
            f"missed {self.misses} neighbours, {found['store_miss']} where this store's index "
            f"missed some, {found['differs']} differing"
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed, "differing": self.differing}


def run_conformance(
    store: str,
    retriever: Retriever,
    fixtures: ConformanceFixtures,
    exact: ExactPools | None = None,
    queries: Sequence[FixtureQuery] | None = None,
) -> StoreConformance:
    """Every recorded query through retrieve() on one store, every part checked."""
    result = StoreConformance(store)
    for query in fixtures.queries if queries is None else queries:
        retrieval = retriever.retrieve(query.text, query.entities, query.terms)
        result.add(query.id, check_query(query, retrieval, fixtures.expected[query.id], exact))
    return result


def texts_to_embed(fixtures: ConformanceFixtures) -> list[str]:
    """Every text the recorded queries embed (to embed them once, in one batch)."""
    plans = (QueryPlan.build(q.text, q.entities, q.terms) for q in fixtures.queries)
    return list(dict.fromkeys(chain.from_iterable(plan.texts() for plan in plans)))
