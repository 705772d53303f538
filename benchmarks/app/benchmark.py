"""The app topic's benchmark: candle-fire's search path through open_collection() vs Chroma."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def app_options(parser) -> None:
    options.sizes(parser, [62_196, 1_000_000], quick=[3_000, 6_000],
                  help="scale corpus sizes, in chunks (the first one also runs Chroma, the "
                  "reader and the threads)")  # fmt: skip
    options.requests(parser, 60, quick=4, help="requests, each answered on every arm")
    options.option(parser, "--threads", options.count, 8, quick=2,
                   help="app threads sharing one collection")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="app",
        summary="candle-fire's search path through open_collection() from 62k to 1M chunks: warm"
        " and cold p50 / p95, against Chroma's same calls and ServingReader at 62k, app threads,"
        " answers against the exact referee",
        sections=("app",),
        run="benchmarks.app.run:run",
        add_options=app_options,
    ),
)
