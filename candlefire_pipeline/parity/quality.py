"""Ranking quality on a judged set: nDCG@10 per query and a paired bootstrap interval.

Pure functions: the judged set (queries with the ids of their relevant papers) and each
ranking come from the caller (operations/generations/quality.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: nDCG cut-off of the quality gate.
K = 10
#: Resampling seed: the same rankings always give the same interval.
SEED = 20240601


@dataclass(frozen=True)
class JudgedQuery:
    qid: str
    text: str
    relevant: frozenset[str]


def load_judged_queries(path: Path) -> list[JudgedQuery]:
    """{"qid", "text", "relevant": [ids]} per line; a clear error naming the bad line."""
    queries = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                relevant = frozenset(str(r) for r in row["relevant"])
                query = JudgedQuery(str(row["qid"]), str(row["text"]), relevant)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{number}: a judged query needs qid, text and relevant ({exc})"
                ) from None
            if not query.text.strip() or not relevant:
                raise ValueError(f"{path}:{number}: empty text or no relevant id")
            queries.append(query)
    return queries


def ndcg_at(ranked: Sequence[str], relevant: frozenset[str], k: int = K) -> float:
    """Binary-gain nDCG@k of one ranking (ids, best first); 0.0 when nothing is relevant."""
    dcg = sum(1 / math.log2(i + 2) for i, pmid in enumerate(ranked[:k]) if pmid in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def bootstrap_interval(
    deltas: Sequence[float], samples: int, seed: int = SEED
) -> tuple[float, float]:
    """95% percentile interval of the mean of paired per-query differences (queries resampled
    with replacement); (nan, nan) without queries."""
    values = np.asarray(deltas, dtype=np.float64)
    if values.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(samples, values.size))
    means = values[picks].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@dataclass(frozen=True)
class QualityComparison:
    """Reference vs candidate nDCG@10 on the judged queries whose relevant papers are indexed."""

    judged_set: str
    queries: int  # in the file
    judged: int  # with at least one relevant paper in the corpus: the ones that count
    corpus_papers: int
    reference_ndcg: float
    candidate_ndcg: float
    delta: float
    ci_low: float
    ci_high: float
    bootstrap_samples: int
    #: the judged queries that lost the most (qid, reference, candidate), worst first
    worst: tuple[tuple[str, float, float], ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def compare_rankings(
    judged_set: str,
    queries: Sequence[JudgedQuery],
    corpus_ids: set[str],
    reference: Sequence[Sequence[str]],
    candidate: Sequence[Sequence[str]],
    samples: int,
) -> QualityComparison:
    """Per-query nDCG@10 of both rankings over the judged queries, and the paired interval."""
    rows = []
    for query, ref, cand in zip(queries, reference, candidate, strict=True):
        relevant = query.relevant & corpus_ids
        if relevant:
            rows.append((query.qid, ndcg_at(ref, relevant), ndcg_at(cand, relevant)))
    deltas = [c - r for _, r, c in rows]
    low, high = bootstrap_interval(deltas, samples)
    mean = lambda xs: float(np.mean(xs)) if xs else math.nan  # noqa: E731 - two uses below
    worst = sorted(rows, key=lambda row: row[2] - row[1])[:5]
    return QualityComparison(
        judged_set=judged_set, queries=len(queries), judged=len(rows),
        corpus_papers=len(corpus_ids), reference_ndcg=mean([r for _, r, _ in rows]),
        candidate_ndcg=mean([c for _, _, c in rows]), delta=mean(deltas), ci_low=low,
        ci_high=high, bootstrap_samples=samples,
        worst=tuple(row for row in worst if row[2] < row[1]),
    )  # fmt: skip
