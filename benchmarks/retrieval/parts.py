"""Retrieval quality (SciFact), full-retrieve latency and the vector layouts at 62k chunks.

The qdrant part (retrieval/qdrant_part.py) is opt-in: --parts qdrant (local mode is slow).
Stores and embeddings are cached under data/bench_retrieval (CANDLEFIRE_BENCH_DIR); each part
keeps its latest figures there, so a run of one part does not drop the others.
"""

from __future__ import annotations

import logging
import time

from benchmarks.common.data import LATENCY_CHUNKS, bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import ExactAnnOracle, Workload, answer_all, latency_workload
from benchmarks.common.stores import (
    BACKENDS,
    embedded_postgres,
    ensure_indexes,
    load,
    open_store,
    sized_label,
)
from benchmarks.retrieval import latency as lat
from benchmarks.retrieval import latency_report as sections
from benchmarks.retrieval import quality as retrieval_quality
from benchmarks.retrieval.layouts import compare
from benchmarks.retrieval.qdrant_part import qdrant_part
from candlefire_pipeline.backends.factory import pg_ann_params
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings

logger = logging.getLogger(__name__)
#: Every part, in the section's order (the qdrant part runs only when asked for).
PARTS = ("quality", "latency", "layouts", "qdrant")


def title(part: str, size: int) -> str:
    return {
        "quality": "### Quality (SciFact)",
        "latency": f"### Latency ({size:,} chunks)",
        "layouts": f"### vector / halfvec / binary quantization ({size:,} chunks)",
        "qdrant": "### Qdrant beside pgvector and Chroma (one run)",
    }[part]


def quality(embedder, dsn: str, args) -> list[str]:
    """nDCG@10 / recall@100 of the semantic stage over the 809 SciFact training claims."""
    figures = retrieval_quality.measure(
        embedder,
        BACKENDS,
        lambda name: open_store(name, dsn, sized_label("scifact", args.docs, None)),
        args.docs,
    )
    return [
        f"Semantic stage (search n=100, over-fetch 200) over {figures['corpus']:,} SciFact"
        f" abstracts, {figures['queries']} training claims, model `{DEFAULT_MODEL_ID}`"
        f" ({embedder.dim}-dim).",
        "",
        *retrieval_quality.table(figures),
    ]


def open_latency_stores(work: Workload, embedder, dsn: str, names=BACKENDS) -> tuple[dict, dict]:
    size = work.rows.num_rows
    stores = {
        name: open_store(name, dsn, sized_label("latency", size, LATENCY_CHUNKS)) for name in names
    }
    loads = {n: load(s, work.rows, embedder.model_id, embedder.dim) for n, s in stores.items()}
    ensure_indexes(stores["pgvector"])
    return stores, loads


def latency(embedder, dsn: str, args) -> list[str]:
    """Full retrieve() per backend with the product's settings; stages, ratios, fan-out."""
    work = latency_workload(embedder, args.size)
    stores, loads = open_latency_stores(work, embedder, dsn)
    requests = work.requests(args.requests)
    ann = stores["pgvector"].ann
    lines = [
        f"Full `retrieve()` on {work.rows.num_rows:,} synthetic chunks (mixtures of real SciFact"
        " title embeddings + noise, normalized, ~1,000-char documents), real model for the query"
        f" and 12 entity names (one embed call, the product's query runtime"
        f" `{embedder.runtime}`; names and variants already in the query-vector cache are not"
        f" embedded again, as shipped), 3 terms; as in candle-fire, the keyword stage and"
        " grounding cover the 12 names followed by the 3 terms (15 keyword terms, each with its"
        f" spelling variants); {args.requests} requests,"
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


def layouts_part(embedder, dsn: str, args) -> list[str]:
    memo = MemoEmbedder(embedder)
    work = latency_workload(embedder, args.size)
    stores, requests, oracle = oracle_and_requests(work, memo, dsn, args.requests)
    ann = pg_ann_params(Settings.from_env())
    lines = compare(
        dsn, work.rows, stores["memory"], memo, requests, oracle, ann,
        builds=not args.no_builds, rebuild=args.rebuild,
        prefix=sized_label("layout", args.size, LATENCY_CHUNKS),
    )  # fmt: skip
    for store in stores.values():
        store.close()
    return lines


RUNNERS = {
    "quality": quality, "latency": latency, "layouts": layouts_part,
    "qdrant": qdrant_part,
}  # fmt: skip


def run(args, out) -> None:
    # the product's query embedder (runtime from settings: ONNX by default), as the app runs it
    embedder = embedder_for(Settings.from_env(), "query")
    if embedder.model_id != DEFAULT_MODEL_ID:
        raise SystemExit(f"the workload is built for {DEFAULT_MODEL_ID}, not {embedder.model_id}")
    measured = {}
    with embedded_postgres() as dsn:
        for part in args.parts:
            started, sampler = time.perf_counter(), LoadMonitor(markers=[bench_dir()]).start()
            lines = RUNNERS[part](embedder, dsn, args)
            measured[part] = "\n".join([title(part, args.size), "", *lines, "",
                                        sampler.stop().note()]) + "\n"  # fmt: skip
            if out.writes:  # a part's latest full figures; the section is built from them all
                (bench_dir() / f"{part}.md").write_text(measured[part])
            logger.info("%s done in %.0f s", part, time.perf_counter() - started)
    if out.writes:
        measured = {
            p: path.read_text() for p in PARTS if (path := bench_dir() / f"{p}.md").exists()
        }
    out.section("retrieval", "## Retrieval\n\n" + "\n\n".join(measured.values()))
