"""The retirement topic's benchmark: unretire's rebuild of a retired Chroma from the ledger."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def unretire_options(parser) -> None:
    options.sizes(parser, [62_196, 250_000], quick=[2_000, 4_000],
                  help="corpus sizes, in chunks (the folder-kept case at the first)")  # fmt: skip
    options.repeats(parser, 3, quick=1, help="repeats of each operation")
    options.option(parser, "--repeat-up-to", options.positive_int, 62_196,
                   help="sizes above this many chunks run once")  # fmt: skip
    options.option(parser, "--drops", options.positive_int, 10, quick=5,
                   help="drops the corpus is written as")  # fmt: skip
    options.option(parser, "--passed-over", options.positive_int, 2,
                   help="last drops passed over while Chroma was retired")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="unretire",
        summary="unretire's rebuild of a retired Chroma from the ledger's batch files at 62k"
        " and 250k chunks, its parts, peak RSS, beside Chroma's first load of the same rows",
        sections=("unretire",),
        run="benchmarks.retirement.rebuild_cost:run",
        add_options=unretire_options,
    ),
)
