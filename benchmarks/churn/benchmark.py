"""The churn topic's benchmark: months of update drops on one pgvector table."""

from __future__ import annotations

import argparse

from benchmarks.common import options
from benchmarks.registry import Benchmark


def share(text: str) -> float:
    value = options.positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value:g} is more than all the papers (at most 1)")
    return value


def churn_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000)
    options.requests(parser, 60, quick=8, help="full retrieve() requests per checkpoint")
    options.option(parser, "--drops", options.positive_int, 50, quick=2, help="update drops")
    options.option(parser, "--every", options.positive_int, 10, quick=1,
                   help="drops between checkpoints")  # fmt: skip
    options.option(parser, "--share", share, 0.2, help="share of the papers each drop replaces")
    options.option(parser, "--maintain-every", options.count, 7, quick=2,
                   help="candlefire maintain --apply every N drops (7: weekly with daily drops;"
                   " 0: never)")  # fmt: skip
    parser.add_argument(
        "--no-pace", dest="pace", action="store_false",
        help="drops back to back (default: wait for autovacuum after each drop, as between"
        " daily drops)",
    )  # fmt: skip
    parser.add_argument(
        "--no-upkeep", dest="upkeep", action="store_false",
        help="skip the store asset's GIN check after each drop (the weekly maintain alone)",
    )  # fmt: skip


def shares(text: str) -> list[float]:
    return [share(part) for part in text.split(",") if part.strip()]


def upkeep_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000)
    options.texts(parser, 10_000, quick=400, help="texts kept in the term cache")
    options.option(parser, "--shares", shares, [0.01, 0.05, 0.2],
                   help="share of the papers each drop replaces (one drop each)")  # fmt: skip


def phrase_options(parser) -> None:
    options.size(parser, 62_196, quick=3_000)
    options.requests(parser, 60, quick=6)
    options.option(parser, "--shares", shares, [0.01, 0.05, 0.2], quick=[0.05],
                   help="share of the papers each drop replaces (one drop each)")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="churn",
        summary="months of update drops on the 62k workload: recall@15, index and heap bytes,"
        " p95 against a fresh build, retrieve() during a REINDEX",
        sections=("churn",),
        run="benchmarks.churn.soak:run",
        add_options=churn_options,
    ),
    Benchmark(
        name="term-cache-upkeep",
        summary="what keeping 10,000 texts exact costs a drop: upkeep seconds against the apply"
        " time, a table without cache side by side, the cache audited after each drop",
        sections=("term-cache-upkeep",),
        run="benchmarks.churn.upkeep:run",
        add_options=upkeep_options,
    ),
    Benchmark(
        name="phrase-index",
        summary="the phrase index on the 62k workload: cold keyword stage routed vs the trigram"
        " index alone (same lists), its build seconds and bytes, what it costs a drop's write",
        sections=("phrase-index",),
        run="benchmarks.churn.phrase:run",
        add_options=phrase_options,
    ),
)
