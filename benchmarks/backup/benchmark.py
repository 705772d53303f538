"""The backup topic's benchmark: backup and restore time and bytes, the ledger re-applying what
the backup lacks."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark


def backup_options(parser) -> None:
    options.sizes(parser, [62_196], quick=[2_000])
    options.option(parser, "--drops", options.positive_int, 10, quick=4,
                   help="drops the corpus is written as")  # fmt: skip
    options.option(parser, "--after", options.positive_int, 2, quick=1,
                   help="last drops, accepted after the backup")  # fmt: skip
    options.option(parser, "--first-drops", options.positive_int, 1, quick=1,
                   help="leading slices written as one first drop (a first build: a large "
                   "store loaded in bulk, not drop by drop)")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="backup",
        summary="candlefire backup take and restore after a lost data directory: seconds and"
        " bytes at 62k (and 1M) chunks, the WAL replay, the ledger re-apply and the checks",
        sections=("backup",),
        run="benchmarks.backup.run:run",
        add_options=backup_options,
    ),
)
