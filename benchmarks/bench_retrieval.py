"""Retrieval quality (SciFact), full-retrieve latency, per-stage ef sweep and layouts at 62k chunks.

Run: .venv/bin/python -m benchmarks.bench_retrieval [--parts quality,latency,sweep,layouts]
     [--requests 60] [--sweep-requests 200] [--no-builds] [--rebuild] [--qdrant-requests 13]
The qdrant part (benchmarks/retrieval_qdrant.py) is opt-in: --parts qdrant (local mode is slow).
Stores and embeddings are cached under data/bench_retrieval (CANDLEFIRE_BENCH_DIR); each part
keeps its latest figures there, so a run of one part does not drop the others.
"""

from __future__ import annotations

import argparse
import logging
import time

from benchmarks import retrieval_latency as lat
from benchmarks import retrieval_quality
from benchmarks import retrieval_sections as sections
from benchmarks.helpers import LoadMonitor, write_section
from benchmarks.retrieval_data import (
    LATENCY_CHUNKS,
    bench_dir,
)
from benchmarks.retrieval_layouts import compare
from benchmarks.retrieval_qdrant import qdrant_part
from benchmarks.retrieval_stores import (
    BACKENDS,
    embedded_postgres,
    ensure_indexes,
    load,
    open_store,
)
from benchmarks.retrieval_sweep import sweep
from benchmarks.retrieval_workload import (
    ExactAnnOracle,
    Workload,
    answer_all,
    latency_workload,
)
from candlefire_pipeline.backends.factory import pg_ann_params
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings

logger = logging.getLogger("bench_retrieval")
PARTS = ("quality", "latency", "sweep", "layouts", "qdrant")
DEFAULT_PARTS = PARTS[:-1]
TITLES = {
    "quality": "### Quality (SciFact)",
    "latency": f"### Latency ({LATENCY_CHUNKS:,} chunks)",
    "sweep": f"### Per-stage ANN effort ({LATENCY_CHUNKS:,} chunks)",
    "layouts": f"### vector / halfvec / binary quantization ({LATENCY_CHUNKS:,} chunks)",
    "qdrant": "### Qdrant beside pgvector and Chroma (one run)",
}


def quality(embedder, dsn: str, args) -> list[str]:
    """nDCG@10 / recall@100 of the semantic stage over the 809 SciFact training claims."""
    figures = retrieval_quality.measure(
        embedder, BACKENDS, lambda name: open_store(name, dsn, "scifact")
    )
    return [
        f"Semantic stage (search n=100, over-fetch 200) over {figures['corpus']:,} SciFact"
        f" abstracts, {figures['queries']} training claims, model `{DEFAULT_MODEL_ID}`"
        f" ({embedder.dim}-dim).",
        "",
        *retrieval_quality.table(figures),
    ]


def open_latency_stores(work: Workload, embedder, dsn: str, names=BACKENDS) -> tuple[dict, dict]:
    stores = {name: open_store(name, dsn, "latency") for name in names}
    loads = {n: load(s, work.rows, embedder.model_id, embedder.dim) for n, s in stores.items()}
    ensure_indexes(stores["pgvector"])
    return stores, loads


def latency(embedder, dsn: str, args) -> list[str]:
    """Full retrieve() per backend with the product's settings; stages, ratios, fan-out."""
    work = latency_workload(embedder)
    stores, loads = open_latency_stores(work, embedder, dsn)
    requests = work.requests(args.requests)
    ann = stores["pgvector"].ann
    lines = [
        f"Full `retrieve()` on {work.rows.num_rows:,} synthetic chunks (mixtures of real SciFact"
        " title embeddings + noise, normalized, ~1,000-char documents), real model for the query"
        f" and 12 entity names (one embed call, the product's query runtime"
        f" `{embedder.runtime}`; names and variants already in the query-vector cache are not"
        f" embedded again, as shipped), 3 grounding terms; {args.requests} requests,"
        " 3 warm-up, backends interleaved; no reranker configured (RRF order). pgvector runs the"
        f" product settings: {ann.vector_type}, ANN quantization {ann.quantization}, ef_search"
        f" semantic {ann.ef_search} / entities {ann.ef_search_entities}.",
        f"Load seconds (0 = reused cache): {', '.join(f'{k} {v:.0f}' for k, v in loads.items())}.",
        "",
    ]
    retrievers = {name: Retriever(s, embedder) for name, s in stores.items()}
    measured = lat.run_requests(retrievers, requests)
    hits = retrievers["pgvector"].vector_cache.hit_rate
    lines[-2] += f" Query-vector cache hit rate (names and variants): {hits:.0%}."
    lines += sections.stage_table(measured, BACKENDS)
    lines += ["", sections.where_time_goes(measured["pgvector"]["timings"])]
    lines += sections.chroma_ratio(measured)
    lines += sections.agreement_table(stores, measured, embedder, requests)
    lines += sections.fan_out_section(stores["pgvector"], measured, embedder, requests)
    lines += sections.grounding_section(stores, embedder, requests)
    for store in stores.values():
        store.close()
    return lines


def oracle_and_requests(work: Workload, embedder, dsn: str, n: int):
    stores, _ = open_latency_stores(work, embedder, dsn, ("pgvector", "memory"))
    requests = work.requests(n)
    exact = ExactAnnOracle(stores["memory"], stores["pgvector"])
    oracle = answer_all(Retriever(exact, embedder), requests)
    return stores, requests, oracle


def sweep_part(embedder, dsn: str, args) -> list[str]:
    memo = MemoEmbedder(embedder)
    stores, requests, oracle = oracle_and_requests(
        latency_workload(embedder), memo, dsn, args.sweep
    )
    lines, _, _ = sweep(dsn, "latency", pg_ann_params(Settings.from_env()), memo, requests, oracle)
    for store in stores.values():
        store.close()
    return lines


def layouts_part(embedder, dsn: str, args) -> list[str]:
    memo = MemoEmbedder(embedder)
    work = latency_workload(embedder)
    stores, requests, oracle = oracle_and_requests(work, memo, dsn, args.requests)
    ann = pg_ann_params(Settings.from_env())
    lines = compare(
        dsn, work.rows, stores["memory"], memo, requests, oracle, ann,
        builds=not args.no_builds, rebuild=args.rebuild,
    )  # fmt: skip
    for store in stores.values():
        store.close()
    return lines


RUNNERS = {
    "quality": quality, "latency": latency, "sweep": sweep_part, "layouts": layouts_part,
    "qdrant": qdrant_part,
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", default=",".join(DEFAULT_PARTS))
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--sweep-requests", dest="sweep", type=int, default=200)
    parser.add_argument("--no-builds", action="store_true", help="skip HNSW builds by size")
    parser.add_argument("--rebuild", action="store_true", help="first-build every layout table")
    parser.add_argument("--qdrant-requests", dest="qdrant_requests", type=int, default=13)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    # the product's query embedder (runtime from settings: ONNX by default), as the app runs it
    embedder = embedder_for(Settings.from_env(), "query")
    if embedder.model_id != DEFAULT_MODEL_ID:
        parser.error(f"the workload is built for {DEFAULT_MODEL_ID}, not {embedder.model_id}")
    with embedded_postgres() as dsn:
        for part in parts:
            started, sampler = time.perf_counter(), LoadMonitor(markers=[bench_dir()]).start()
            lines = RUNNERS[part](embedder, dsn, args)
            save_part(part, [TITLES[part], "", *lines, "", sampler.stop().note()])
            logger.info("%s done in %.0f s", part, time.perf_counter() - started)
    markdown = "\n\n".join(
        path.read_text() for part in PARTS if (path := bench_dir() / f"{part}.md").exists()
    )
    print(markdown)
    write_section("retrieval", "## Retrieval\n\n" + markdown)


def save_part(part: str, lines: list[str]) -> None:
    (bench_dir() / f"{part}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
