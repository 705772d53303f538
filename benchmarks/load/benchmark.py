"""The load topic's benchmarks: bulk-load rates and first builds, and an incremental drop."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark

LOAD_PARTS = ("postgres", "workload", "chroma", "qdrant")


def load_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000, help="synthetic rows loaded")
    options.option(parser, "--insert-rows", options.positive_int, 10_000, quick=1_000,
                   help="rows the executemany INSERT loads (it is slow)")  # fmt: skip
    options.repeats(parser, 3, quick=1)
    options.option(parser, "--chroma-rows", options.positive_int, 5_461, quick=500,
                   help="rows upserted into Chroma")  # fmt: skip
    options.option(parser, "--chroma-repeats", options.positive_int, 3, quick=1,
                   help="Chroma repeats")  # fmt: skip
    options.option(parser, "--qdrant-rows", options.positive_int, 5_461, quick=500,
                   help="rows loaded into Qdrant")  # fmt: skip
    options.option(parser, "--qdrant-repeats", options.positive_int, 3, quick=1,
                   help="Qdrant repeats")  # fmt: skip
    options.parts(parser, LOAD_PARTS)


def incremental_options(parser) -> None:
    options.option(parser, "--new", options.positive_int, 150, quick=20,
                   help="new papers in the drop")  # fmt: skip
    options.option(parser, "--updates", options.positive_int, 50, quick=10,
                   help="updated base papers in the drop")  # fmt: skip
    options.docs(parser, quick=300, help="SciFact papers in the corpus")


BENCHMARKS = (
    Benchmark(
        name="load",
        summary="bulk-load rates (INSERT, documented COPY, the project's path), first-build"
        " phases, Chroma's and Qdrant's ingest",
        sections=("load",),
        run="benchmarks.load.bulk:run",
        add_options=load_options,
    ),
    Benchmark(
        name="incremental",
        summary="a 200-paper drop on the SciFact corpus vs a full build, stage by stage",
        sections=("incremental",),
        run="benchmarks.load.incremental:run",
        add_options=incremental_options,
    ),
)
