"""Filtered semantic queries of the filters benchmark: Filters of a target selectivity, and one
store's answers to them measured against the exact oracle."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from benchmarks.common.matrix_oracle import MatrixOracle
from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.parity import metrics

TARGETS = (0.5, 0.1, 0.01, 0.001)
#: Rows asked per query: the semantic stage's 2n for candle-fire's pool of 30 papers.
LIMIT = 60


@dataclass(frozen=True)
class Case:
    kind: str  # "years" (+ has_full_text when years alone cannot be that selective) | "pmids"
    target: float
    where: Filter
    selectivity: float  # measured on the corpus
    matching: int


def _share(oracle: MatrixOracle, where: Filter) -> tuple[float, int]:
    keep = oracle.mask(where)
    count = int(keep.sum()) if keep is not None else len(oracle.corpus.chunk_ids)
    return count / len(oracle.corpus.chunk_ids), count


def year_case(oracle: MatrixOracle, target: float) -> Case:
    """The contiguous year range, with or without has_full_text=False, closest to `target`
    (in log ratio); years run 1985-2025 and 7% of the chunks belong to abstract-only papers."""
    years = oracle.corpus.years
    low, high = int(np.nanmin(years)), int(np.nanmax(years))
    best: tuple[float, Filter] | None = None
    for full_text in (None, False):
        for start in range(low, high + 1):
            for end in range(start, high + 1):
                where = Filter(min_year=start, max_year=end, has_full_text=full_text)
                share = _range_share(years, oracle.corpus.has_full_text, start, end, full_text)
                gap = abs(np.log(max(share, 1e-9) / target))
                if best is None or gap < best[0]:
                    best = (gap, where)
    share, count = _share(oracle, best[1])
    return Case("years", target, best[1], share, count)


def _range_share(years, full_text, start, end, wanted) -> float:
    with np.errstate(invalid="ignore"):
        keep = (years >= start) & (years <= end)
    if wanted is not None:
        keep &= full_text == wanted
    return float(keep.mean())


def pmid_case(oracle: MatrixOracle, target: float, seed: int = 5) -> Case:
    """Whole papers drawn at random until their chunks reach `target` of the corpus."""
    pmids, counts = np.unique(oracle.corpus.pmids.astype(str), return_counts=True)
    order = np.random.default_rng(seed).permutation(len(pmids))
    need = target * len(oracle.corpus.chunk_ids)
    taken = int(np.searchsorted(np.cumsum(counts[order]), need)) + 1
    where = Filter(pmids=tuple(sorted(pmids[order[:taken]].tolist())))
    share, count = _share(oracle, where)
    return Case("pmids", target, where, share, count)


def cases(oracle: MatrixOracle) -> list[Case]:
    return [make(oracle, t) for t in TARGETS for make in (year_case, pmid_case)]


def measure(
    store, oracle: MatrixOracle, case: Case, queries: np.ndarray, budget_s: float | None = None
) -> dict:
    """Rows returned, recall@LIMIT against the oracle, and latency of each filtered query; stops
    after the query that spends `budget_s` seconds of store time (at least one query runs)."""
    expected = min(LIMIT, case.matching)
    rows, recall, seconds = [], [], []
    for vector in queries:
        if budget_s is not None and sum(seconds) > budget_s:
            break
        started = time.perf_counter()
        (found,) = store.semantic_candidates(vector[None, :], LIMIT, case.where, stage="semantic")
        seconds.append(time.perf_counter() - started)
        (exact,) = oracle.top(vector[None, :], LIMIT, case.where)
        truth = [oracle.corpus.chunk_ids[i] for i, _ in exact]
        rows.append(len(found))
        recall.append(metrics.recall([r["chunk_id"] for r in found], truth))
    return {
        "expected": expected,
        "rows_mean": float(np.mean(rows)),
        "rows_min": int(min(rows)),
        "recall": float(np.mean(recall)),
        "seconds": seconds,
        "queries": len(seconds),
        "asked": len(queries),
    }
