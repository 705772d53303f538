"""The drill topic's benchmark: kill points of a drop at 62k chunks, each checked after the
run that follows it (candlefire_pipeline_tests/reliability/drill/)."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark

#: Kill points per stage in a full run (>= 50 in all); --quick: one each.
POINTS = {"copy": 14, "upkeep": 12, "phrase": 5, "hnsw": 4, "switch": 8, "unretire": 7, "adopt": 6}


def drill_options(parser) -> None:
    options.size(parser, 62_196, quick=1_500)
    options.option(parser, "--stages", options.names_of(tuple(POINTS)), list(POINTS),
                   help=f"comma-separated stages, of {', '.join(POINTS)} (a subset writes "
                   "the section drill-stages; the full run's drill section is kept)")  # fmt: skip
    options.option(parser, "--points", options.positive_int, 0, quick=1,
                   help="kill points per stage (0: the full run's mix, 56 in all)")  # fmt: skip
    options.option(parser, "--adopt-papers", options.positive_int, 3_000, quick=300,
                   help="papers of the app collection the adopt stage imports")  # fmt: skip
    options.option(parser, "--dim", options.positive_int, 128, quick=32,
                   help="vector dimension (hashing vectors: the drill needs no model)")  # fmt: skip
    options.option(parser, "--seed", options.positive_int, 20261206,
                   help="the drill's seed (printed; the same seed, the same points)")  # fmt: skip
    options.option(parser, "--share", options.positive_float, 0.01, quick=0.05,
                   help="share of the papers a drop revises")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="drill",
        summary="SIGKILL of Postgres or the run worker at random points of a drop (COPY, term"
        " cache upkeep, phrase and HNSW builds, switch writes, unretire's rebuild, an adoption"
        " import) at 62k chunks",
        sections=("drill", "drill-stages"),
        run="benchmarks.drill.run:run",
        add_options=drill_options,
    ),
)
