"""How a figure is taken and shown: a median of timed calls, p50 / p95 in ms, chunk recall, MB.

Ranking and latency statistics come from candlefire_pipeline.parity.metrics (the parity
report's own definitions), so a benchmark and the flip gate measure the same thing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from candlefire_pipeline.parity import metrics

MB = 1024 * 1024


def timed(call: Callable[[], object], repeats: int = 1) -> tuple[float, object]:
    """Median seconds of call() over `repeats` runs, and the last run's result."""
    seconds, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def ms(seconds: Sequence[float]) -> str:
    """ "p50 / p95" of durations in milliseconds (the parity report's percentile)."""
    return f"{metrics.p50(seconds) * 1e3:.1f} / {metrics.p95(seconds) * 1e3:.1f}"


def chunk_recall(found: Sequence[Sequence[dict]], exact: Sequence[Sequence[dict]]) -> float:
    """Mean share of the exact search's chunk ids that an ANN search returned, per query."""
    return metrics.mean(
        [
            metrics.recall([r["chunk_id"] for r in got], [r["chunk_id"] for r in ref])
            for got, ref in zip(found, exact, strict=True)
        ]
    )
