"""The filters topic's benchmark: filtered semantic queries at 50%-0.1% selectivity."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def filters_options(parser) -> None:
    options.size(parser, 250_000, quick=6_000)
    options.option(
        parser,
        "--queries",
        options.positive_int,
        20,
        quick=4,
        help="SciFact claims asked per case (semantic queries, not full requests)",
    )
    options.layouts(parser, ("vector", "halfvec", "binary"))
    options.stores(parser, ("pgvector", "chroma", "qdrant"))
    options.option(parser, "--case-budget", options.positive_float, 120.0,
                   help="store seconds one store may spend on one case")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="filters",
        summary="filtered semantic queries at 50%-0.1% selectivity on every store: recall,"
        " latency, pgvector's iterative-scan settings and plans",
        sections=("filters",),
        run="benchmarks.filters.queries:run",
        add_options=filters_options,
    ),
)
