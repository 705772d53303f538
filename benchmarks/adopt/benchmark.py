"""The adopt topic's benchmark: reading, reporting and importing the app's own collection."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def adopt_options(parser) -> None:
    options.sizes(parser, [62_196, 250_000], quick=[2_000, 4_000],
                  help="app collection sizes, in chunks")  # fmt: skip
    options.repeats(parser, 1, help="repeats of each operation (fresh processes)")


BENCHMARKS = (
    Benchmark(
        name="adopt",
        summary="the adoption report and the import of an app collection built by candle-fire's"
        " indexing rules, at 62k and 250k rows: rows/s and peak RSS against a bare paginated get",
        sections=("adopt",),
        run="benchmarks.adopt.run:run",
        add_options=adopt_options,
    ),
)
