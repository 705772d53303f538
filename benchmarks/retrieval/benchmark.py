"""The retrieval topic's benchmarks: quality and full-retrieve latency per store, the per-stage
ANN effort that keeps recall on every HNSW build, and Qdrant local mode's own costs."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark

RETRIEVAL_PARTS = ("quality", "latency", "layouts", "qdrant")


def retrieval_options(parser) -> None:
    options.parts(parser, RETRIEVAL_PARTS, full=RETRIEVAL_PARTS[:-1])
    options.size(parser, 62_196, quick=3_000, help="chunks of the latency workload")
    options.requests(parser, 60, quick=8)
    options.docs(parser, quick=300, help="SciFact abstracts of the quality part")
    parser.add_argument("--no-builds", action="store_true", help="skip HNSW builds by size")
    parser.add_argument("--rebuild", action="store_true", help="first-build every layout table")
    options.option(parser, "--qdrant-requests", options.positive_int, 13, quick=4,
                   help="requests of the qdrant part (local mode is slow)")  # fmt: skip


def effort_options(parser) -> None:
    options.size(parser, 62_196, quick=8_000)
    options.requests(parser, 200, quick=20, help="full retrieve() requests per sweep point")
    options.option(parser, "--fan-out-requests", options.positive_int, 60, quick=10,
                   help="requests of the fan-out measurement")  # fmt: skip
    options.option(parser, "--builds", options.positive_int, 3,
                   help="HNSW builds (row orders) swept")  # fmt: skip


def qdrant_options(parser) -> None:
    options.size(parser, 20_000, quick=2_000)
    options.repeats(parser, 5, quick=1)


BENCHMARKS = (
    Benchmark(
        name="retrieval",
        summary="SciFact quality per store, full retrieve() latency by stage at 62k chunks, the"
        " vector / halfvec / binary layouts; Qdrant beside them on request",
        sections=("retrieval",),
        run="benchmarks.retrieval.parts:run",
        add_options=retrieval_options,
    ),
    Benchmark(
        name="effort",
        summary="the per-stage hnsw.ef_search that keeps final recall@15 >= 0.99 on three HNSW"
        " builds, and what the entity fan-out then costs",
        sections=("effort",),
        run="benchmarks.retrieval.effort:run",
        add_options=effort_options,
    ),
    Benchmark(
        name="qdrant",
        summary="Qdrant local mode: upsert batch size, reopen cost, substring per term (local"
        " mode vs the engine)",
        sections=("qdrant",),
        run="benchmarks.retrieval.qdrant_local:run",
        add_options=qdrant_options,
    ),
)
