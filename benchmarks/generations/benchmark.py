"""The generations topic's benchmark: a new index generation built beside the serving one."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark

#: The generations that can be built beside the serving one (generations/beside.NEW).
NEW_GENERATIONS = ("halfvec", "int8")


def generations_options(parser) -> None:
    options.size(parser, 62_196, quick=1_000, help="chunks (62,196: the anchor)")
    options.option(parser, "--drops", options.positive_int, 20, quick=3,
                   help="ingested drops the chunks come in")  # fmt: skip
    options.option(parser, "--idle", options.positive_int, 100, quick=20,
                   help="idle requests before a build")  # fmt: skip
    options.option(
        parser,
        "--new",
        options.names_of(NEW_GENERATIONS),
        list(NEW_GENERATIONS),
        quick=["halfvec"],
        help="generations built beside the serving one",
    )


BENCHMARKS = (
    Benchmark(
        name="generations",
        summary="a new index generation built beside the serving one vs a cold rebuild, cache"
        " hits, the serving p95 while it builds, bytes per generation",
        sections=("generations",),
        run="benchmarks.generations.beside:run",
        add_options=generations_options,
    ),
)
