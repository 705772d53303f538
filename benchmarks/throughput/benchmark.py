"""The throughput topic's benchmarks: embedding chunks/s per core (and on a local Ray cluster),
and requests/s of one shared reader under 1-8 client threads."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def per_core_options(parser) -> None:
    options.parts(parser, ("per-core", "ray"))
    options.texts(parser, 256, quick=8, help="chunks of each corpus MiniLM embeds")
    options.option(parser, "--mpnet-texts", options.positive_int, 32, quick=4,
                   help="chunks the 768-dim model embeds (it is ~10x slower)")  # fmt: skip
    options.repeats(parser, 3, quick=1)


def concurrency_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000)
    options.requests(parser, 60, help="requests in the mix every thread loops over")
    options.seconds(parser, 60.0, quick=5.0, help="seconds per thread count and store")
    options.option(parser, "--threads", options.int_list, [1, 2, 4, 8], quick=[1, 4],
                   help="client thread counts")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="throughput",
        summary="embedding chunks/s per core (MiniLM, a BioLORD-sized MPNet) and on a local Ray"
        " cluster",
        sections=("throughput",),
        run="benchmarks.throughput.per_core:run",
        add_options=per_core_options,
    ),
    Benchmark(
        name="concurrency",
        summary="requests/s and p50 / p95 of one shared reader under 1-8 client threads,"
        " pgvector and Chroma",
        sections=("concurrency",),
        run="benchmarks.throughput.shared_reader:run",
        add_options=concurrency_options,
    ),
)
