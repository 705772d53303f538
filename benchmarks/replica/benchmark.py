"""The replica topic's benchmark: a hot standby's lag during 20% drops, the reader meanwhile."""

from __future__ import annotations

from benchmarks.churn.benchmark import share
from benchmarks.common import options
from benchmarks.registry import Benchmark


def replica_options(parser) -> None:
    options.size(parser, 62_196, quick=1_500)
    options.option(parser, "--share", share, 0.2, help="share of the papers each drop replaces")
    options.option(parser, "--hold", options.positive_float, 10.0, quick=2.0,
                   help="seconds the replay stays paused after the second drop")  # fmt: skip
    options.option(parser, "--sample", options.positive_int, 20, quick=5,
                   help="papers of each drop a reader's get() asks for")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="replica",
        summary="a streaming replica's lag during 20% drops on the 62k workload (bytes and"
        " seconds over time, max and median), a paused replay's catch-up, and what the app's"
        " collection on the replica answered meanwhile (previous state, new, torn, errors)",
        sections=("replica",),
        run="benchmarks.replica.lag:run",
        add_options=replica_options,
    ),
)
