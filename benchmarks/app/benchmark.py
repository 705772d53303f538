"""The app topic's benchmark: candle-fire's search path through open_collection() vs Chroma."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def app_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000, help="chunks of the latency workload")
    options.requests(parser, 60, quick=4, help="requests, each answered on every arm")
    options.option(parser, "--warmup", options.count, 3, quick=1,
                   help="untimed requests on the collection arms first")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="app",
        summary="candle-fire's search path through open_collection() on pgvector vs the same"
        " calls on Chroma at 62k chunks, ServingReader beside them: p50 / p95, calls, answers",
        sections=("app",),
        run="benchmarks.app.side_by_side:run",
        add_options=app_options,
    ),
)
