"""Pure ranking-agreement and latency statistics used by the parity report."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _unique(items: Sequence[str]) -> list[str]:
    """Items in first-seen order without repeats (a ranking names each PMID once)."""
    return list(dict.fromkeys(items))


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two sets; two empty sets agree fully (1.0)."""
    left, right = set(a), set(b)
    union = left | right
    return len(left & right) / len(union) if union else 1.0


def recall(candidate: Sequence[str], reference: Sequence[str]) -> float:
    """Share of the reference's items the candidate also returns; 1.0 for an empty reference."""
    wanted = set(reference)
    return len(wanted & set(candidate)) / len(wanted) if wanted else 1.0


def overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """|A ∩ B| / max(|A|, |B|): the top-k overlap the parity gate uses; 1.0 when both are empty.

    Symmetric, equals recall when both lists are full, and (unlike recall) drops when one side
    returns extra items the other lacks.
    """
    left, right = set(a), set(b)
    size = max(len(left), len(right))
    return len(left & right) / size if size else 1.0


def rbo(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap RBO_ext (Webber, Moffat & Zobel 2010, eq. 32).

    Handles lists of different lengths (the shorter one is treated as a prefix whose unseen
    tail agrees at the observed rate); identical lists give 1.0, disjoint lists 0.0, and a list
    that is a prefix of the other also gives 1.0. Two empty lists agree fully (1.0).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"rbo persistence p must be in (0, 1), got {p}")
    longer, shorter = _unique(a), _unique(b)
    if len(longer) < len(shorter):
        longer, shorter = shorter, longer
    s, l = len(shorter), len(longer)  # noqa: E741 - the paper's symbols
    if l == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_long: set[str] = set()
    seen_short: set[str] = set()
    overlap_at: list[int] = [0]  # overlap_at[d] = X_d, size of the intersection of the d-prefixes
    for depth in range(1, l + 1):
        seen_long.add(longer[depth - 1])
        if depth <= s:
            seen_short.add(shorter[depth - 1])
        overlap_at.append(len(seen_long & seen_short))
    x_s, x_l = overlap_at[s], overlap_at[l]
    weighted = sum(overlap_at[d] / d * p**d for d in range(1, l + 1))
    tail = sum(x_s * (d - s) / (s * d) * p**d for d in range(s + 1, l + 1))
    value = (1 - p) / p * (weighted + tail) + ((x_l - x_s) / l + x_s / s) * p**l
    return round(value, 12)  # identical lists give exactly 1.0, not 0.9999999999999998


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default); NaN for no values."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in 0..100, got {q}")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def p50(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95.0)


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for no values."""
    return sum(values) / len(values) if values else math.nan
