"""The embedding topic's benchmarks: the stage against the raw model, a build's peak RSS, the
runtimes (torch, ONNX, int8) side by side, and what one ONNX call costs."""

from __future__ import annotations

from benchmarks.common import options
from benchmarks.registry import Benchmark
from candlefire_pipeline.settings import EMBED_RUNTIMES, Settings


def embedding_options(parser) -> None:
    options.parts(parser, ("stage", "rss"))
    options.texts(parser, 1000, quick=50, help="SciFact abstracts the stage part embeds")
    options.repeats(parser, 3, quick=1)
    options.size(parser, 62_196, quick=600, help="chunks in the drop whose peak RSS is measured")
    options.option(
        parser,
        "--model-chunks",
        options.positive_int,
        4096,
        quick=100,
        help="chunks of that drop the real model embeds (the data path covers all)",
    )
    options.option(
        parser,
        "--runtime",
        str,
        Settings.from_env().embed_runtime_bulk,
        help=f"bulk runtime of the RSS part, of {', '.join(EMBED_RUNTIMES)}",
    )


def runtime_options(parser) -> None:
    options.parts(parser, ("speed", "agreement"))
    options.requests(parser, 60, quick=5, help="query-path requests (1 claim + 12 names each)")
    options.texts(parser, 256, quick=16, help="1,000-character chunks the bulk part embeds")
    options.option(parser, "--batch-sizes", options.int_list, [16, 32, 64, 128], quick=[16],
                   help="bulk batch sizes")  # fmt: skip
    options.docs(parser, quick=200, help="SciFact documents the agreement part embeds")


def call_cost_options(parser) -> None:
    options.repeats(parser, 15, quick=2, help="calls per batch shape (the fastest counts)")
    options.option(parser, "--runtime", str, "onnx", help="the ONNX runtime fitted")


BENCHMARKS = (
    Benchmark(
        name="embedding",
        summary="the embedding stage against the raw model call (throughput ratio), and the peak"
        " RSS of a 62k-chunk build",
        sections=("embedding", "embedding-rss"),
        run="benchmarks.embedding.stage:run",
        add_options=embedding_options,
    ),
    Benchmark(
        name="runtime",
        summary="torch vs ONNX fp32 vs ONNX int8: query path, bulk, agreement on SciFact",
        sections=("embedding-runtime", "embedding-agreement"),
        run="benchmarks.embedding.runtime:run",
        add_options=runtime_options,
    ),
    Benchmark(
        name="onnx-call-cost",
        summary="what one ONNX call costs beyond its padded tokens (the fit behind"
        " CALL_OVERHEAD_TOKENS)",
        sections=(),
        run="benchmarks.embedding.call_cost:run",
        add_options=call_cost_options,
    ),
)
