"""The cold-start topic's benchmark: a fresh process to its first answer, per store."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def cold_start_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000)
    options.repeats(parser, 3, quick=1, help="runs per store")
    options.option(parser, "--bandwidth", options.positive_float, 100.0,
                   help="MB/s of the derived boot download")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="cold-start",
        summary="a fresh process to its first answer: Chroma as candle-fire ships it, pgvector"
        " on a running server, Qdrant local mode, the flipped app's open_collection()",
        sections=("cold-start",),
        run="benchmarks.cold_start.first_answer:run",
        add_options=cold_start_options,
    ),
)
