"""The scale topic's benchmarks: the cost curve from 62k to 1M chunks, the corpus-shape inputs of
docs/SCALE.md, and pgvector's bytes per row by layout."""

from __future__ import annotations

import argparse

from benchmarks.common import options
from benchmarks.registry import Benchmark

SIZES = [62_196, 250_000, 1_000_000]
#: The default layout is built last, so a kept table is left as the product would build it.
BUILD_ORDER = ("halfvec", "binary", "vector")


def efforts(text: str) -> list[tuple[int, int]]:
    """ "200:40,400:400" -> [(200, 40), (400, 400)]: hnsw.ef_search semantic:entities pairs."""
    pairs = []
    for pair in (item.strip() for item in text.split(",") if item.strip()):
        semantic, _, entities = pair.partition(":")
        try:
            pairs.append((options.positive_int(semantic), options.positive_int(entities)))
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(
                f"{pair!r} is not semantic:entities ({error})"
            ) from None
    return pairs


def cost_curve_options(parser) -> None:
    options.sizes(parser, SIZES, quick=[3_000, 6_000])
    options.requests(parser, 60, quick=8)
    options.layouts(parser, BUILD_ORDER)
    options.option(parser, "--chroma-sizes", options.int_list, SIZES, quick=[3_000],
                   help="sizes at which Chroma is loaded and queried")  # fmt: skip
    options.option(parser, "--chroma-budget", options.positive_float, 3600.0,
                   help="seconds a Chroma load may take")  # fmt: skip
    options.option(parser, "--chroma-requests", options.positive_int, 20, quick=5,
                   help="requests on Chroma")  # fmt: skip
    options.option(parser, "--chroma-query-budget", options.positive_float, 1200.0,
                   help="seconds Chroma's requests may take")  # fmt: skip
    options.option(
        parser,
        "--efforts",
        efforts,
        [],
        help="semantic:entities ef_search pairs measured on the vector layout",
    )
    options.option(parser, "--keep", options.int_list, [62_196, 250_000],
                   help="sizes whose pgvector table is kept for the next run")  # fmt: skip


def pg_sizes_options(parser) -> None:
    options.sizes(parser, [5_000, 10_000, 20_000], quick=[1_000, 2_000],
                  help="table sizes (rows) of the HNSW build times")  # fmt: skip


BENCHMARKS = (
    Benchmark(
        name="scale",
        summary="the cost curve 62k-1M chunks: build phases, bytes, server memory, p50 / p95,"
        " recall@15 per layout and Chroma (docs/scale.png)",
        sections=("scale",),
        run="benchmarks.scale.cost_curve:run",
        add_options=cost_curve_options,
    ),
    Benchmark(
        name="scale-inputs",
        summary="corpus shape inputs of docs/SCALE.md: abstracts per citation, chunk length,"
        " chunks per full-text paper",
        sections=("scale-inputs",),
        run="benchmarks.scale.inputs:run",
    ),
    Benchmark(
        name="pg-sizes",
        summary="pgvector bytes per row for vector / halfvec / binary (384 and 768 dims), HNSW"
        " build time by table size, the text part of a row",
        sections=("pg-sizes",),
        run="benchmarks.scale.pg_sizes:run",
        add_options=pg_sizes_options,
    ),
)
