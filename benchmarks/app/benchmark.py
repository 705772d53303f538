"""The app topic's benchmark: candle-fire's search path through open_collection() vs Chroma, on
a local socket and across a network."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark

PARTS = ("app", "network")


def app_options(parser) -> None:
    options.sizes(parser, [62_196, 1_000_000], quick=[3_000, 6_000],
                  help="scale corpus sizes, in chunks (the first one also runs Chroma, the "
                  "reader and the threads; the network part runs at the first only)")  # fmt: skip
    options.requests(parser, 60, quick=4, help="requests, each answered on every arm")
    options.option(parser, "--threads", options.count, 8, quick=2,
                   help="app threads sharing one collection")  # fmt: skip
    options.parts(parser, PARTS)
    options.option(parser, "--rtts", options.number_list, [0, 2, 10], quick=[0, 10],
                   help="network part: round-trip times the delay proxy makes, ms")  # fmt: skip
    options.option(parser, "--commits", options.positive_int, 10, quick=3,
                   help="network part: drops committed per RTT and arm for the staleness"
                   " window")  # fmt: skip
    options.option(
        parser,
        "--install",
        options.yes_no,
        True,
        help="network part: measure the install in a fresh venv (yes/no)",
    )


BENCHMARKS = (
    Benchmark(
        name="app",
        summary="candle-fire's search path through open_collection() from 62k to 1M chunks: warm"
        " and cold p50 / p95, against Chroma's same calls and ServingReader at 62k, app threads,"
        " answers against the exact referee; across a network (a delay proxy at each RTT): vs"
        " ServingReader, round trips counted, threads, the staleness window, the install",
        sections=("app", "app-network"),
        run="benchmarks.app.run:run",
        add_options=app_options,
    ),
)
