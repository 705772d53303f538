"""The cost curve: pgvector (vector / halfvec / binary HNSW) and Chroma from 62k to 1M chunks.

Per size: a first build in phases (COPY, primary key, btree, trigram GIN, then each layout's HNSW
index swapped in on the same table), table and index bytes, the server's peak memory (PSS of
every Postgres process), full retrieve() p50 / p95 on the retrieval request mix, and recall@15
of the final list and of each stage's list against an exact oracle (numpy over the same vectors).
Chroma (the product's ChromaBackend) at the sizes in --chroma-sizes, each load cut off after
--chroma-budget seconds. Results are kept per size under data/bench_retrieval/scale/, so a run
of one size keeps the others (and of some layouts, or without Chroma, keeps the rest of that
size); the section and docs/scale.png are drawn from all of them.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.common.data import bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.stores import load_chroma, open_chroma
from benchmarks.common.scaled.tables import (
    EXACT_SUBSTRINGS,
    LAYOUTS,
    ServerMemory,
    build_ann,
    load_table,
    open_layout,
    table_name,
)
from benchmarks.common.section import BENCHMARKS_MD
from benchmarks.common.stores import embedded_postgres
from benchmarks.scale import report
from benchmarks.scale.benchmark import BUILD_ORDER
from benchmarks.scale.queries import measure, oracle_answers
from benchmarks.scale.workloads import pool_pass, run_workload, workloads
from candlefire_pipeline.backends.pg.terms.summary import summarize as summarize_cache
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings

log = logging.getLogger(__name__)
PLOT = BENCHMARKS_MD.parent / "scale.png"


def results_dir(quick: bool) -> Path:
    path = bench_dir() / ("scale_quick" if quick else "scale")
    path.mkdir(parents=True, exist_ok=True)
    return path


def measure_size(dsn: str, embedder, size: int, args) -> dict:
    memory = ServerMemory(bench_dir() / "pg")
    try:
        corpus, base = load_table(dsn, embedder, size, memory)
        sets = workloads(corpus, args.requests)
        result: dict = {"size": size, "build": asdict(base), "layouts": {}, "efforts": []}
        product = LAYOUTS["vector"]
        result["ann"] = {"ef_search": product.ef_search,
                         "ef_search_entities": product.ef_search_entities}  # fmt: skip
        oracle: dict[str, list] = {}
        for layout in (name for name in BUILD_ORDER if name in args.layouts):
            ann = build_ann(dsn, size, layout, memory)
            if not oracle:
                oracle = exact_answers(dsn, corpus, size, layout, embedder, sets)
            memory.phase_peak()
            store = open_layout(dsn, table_name(size), layout)
            measured = measure_layout(store, embedder, sets, oracle, cold=layout == "vector")
            measured["query"]["server_peak"] = memory.phase_peak()
            result["layouts"][layout] = {"build": asdict(ann), **measured}
            if layout == "vector":
                result["term_cache"] = asdict(summarize_cache(store.conn, store.names))
            store.close()
            log.info("%d %s: %s", size, layout, json.dumps(measured["query"]["recall"]))
        for ef, ef_entities in args.efforts:
            store = open_layout(dsn, table_name(size), "vector", ef_search=ef,
                                ef_search_entities=ef_entities)  # fmt: skip
            query = measure_layout(store, embedder, sets, oracle, cold=False)["query"]
            store.close()
            result["efforts"].append({"ef_search": ef, "ef_search_entities": ef_entities,
                                      "query": query})  # fmt: skip
    finally:
        memory.stop()
    if size in args.chroma_sizes:
        result["chroma"] = chroma_part(corpus, embedder, sets.assistant, oracle["assistant"], args)
    return result


def exact_answers(dsn, corpus, size, layout, embedder, sets) -> dict[str, list]:
    """The exact oracle's answers to both workloads (numpy ANN, every substring exact)."""
    store = open_layout(dsn, table_name(size), layout, cache=EXACT_SUBSTRINGS)
    memo = MemoEmbedder(embedder)
    try:
        return {name: oracle_answers(corpus, store, memo, getattr(sets, name))
                for name in ("assistant", "cold")}  # fmt: skip
    finally:
        store.close()


def measure_layout(store, embedder, sets, oracle, cold: bool) -> dict:
    """On an emptied term cache: the cold workload (when asked), then one pass over the
    assistant pool, then the assistant workload warm (the layout's `query` figures)."""
    store.clear_term_cache("the benchmark measures from an empty cache")
    out: dict = {}
    if cold:
        fresh = Retriever(store, embedder)
        out["cold"] = run_workload(fresh, sets.cold, oracle["cold"], sets.cold_warmup)
    retriever = Retriever(store, embedder)
    out["pool_pass_s"] = pool_pass(retriever, sets.pool_pass)
    out["query"] = run_workload(retriever, sets.assistant, oracle["assistant"])
    return out


def chroma_part(corpus, embedder, requests, oracle, args) -> dict:
    """Chroma (no term cache) on the assistant requests the pgvector figures come from."""
    load = load_chroma(corpus, args.chroma_budget)
    out: dict = {"load": load}
    if load["complete"]:
        store = open_chroma(corpus.size)
        out["query"] = measure(store, embedder, requests[: args.chroma_requests], oracle,
                               budget_s=args.chroma_query_budget)  # fmt: skip
        store.close()
    return out


def merged(result: dict, path: Path) -> dict:
    """This run's figures over the size's earlier ones: the layouts, efforts and Chroma part
    this run did not measure are kept, and the load line says which run measured what."""
    if not path.exists():
        return result
    earlier = json.loads(path.read_text())
    kept = [name for name in earlier.get("layouts", {}) if name not in result["layouts"]]
    result["layouts"] = {**{name: earlier["layouts"][name] for name in kept}, **result["layouts"]}
    if earlier.get("efforts") and not result["efforts"]:
        result["efforts"], kept = earlier["efforts"], [*kept, "efforts"]
    if earlier.get("chroma") and "chroma" not in result:
        result["chroma"], kept = earlier["chroma"], [*kept, "Chroma"]
    if kept:
        result["load_note"] += (
            f" Kept from an earlier run ({', '.join(kept)}): {earlier.get('load_note', '')}"
        )
    return result


def drop_table(dsn: str, size: int) -> None:
    store = open_layout(dsn, table_name(size), "vector")
    store.reset()
    store.close()


def render(results: list[dict], args) -> str:
    results = sorted(results, key=lambda r: r["size"])
    first = results[0]
    requests = first["layouts"]["vector"]["query"]["requests"]
    lines = [
        "## Cost curve: 62k to 1M chunks, warm and cold",
        "",
        "The retrieval workload at each size (vectors: real SciFact title embeddings mixed"
        " with noise, text: real SciFact abstracts, ~1,000 characters; the 62,196-chunk corpus"
        " is the retrieval benchmark's own). pgvector: the product's first build fed in slices"
        " (COPY FREEZE, primary key, btree, trigram GIN in one transaction), then each layout's"
        f" HNSW index (m {Settings.hnsw_m} / ef_construction {Settings.hnsw_ef_construction},"
        " maintenance_work_mem from"
        " `pg_bulk.build_memory_mb`, 2 parallel workers) built on the same table; server peak ="
        " PSS of every Postgres"
        f" process. Two workloads of full `retrieve()` requests (SciFact claim + 12 entity names +"
        f" 3 codes; real ONNX query embedding included; {requests} each;"
        " benchmarks/scale/workloads.py): *assistant* (names from the"
        " retrieval benchmarks' bounded pool, codes from half the corpus's codes, new query"
        " texts; measured warm, after one pass over the pool on the same reader) and *cold*"
        " (every name and code unseen, on an emptied term cache); the product's efforts of the"
        f" run ({report.efforts_text(results)}); recall@15 against the exact oracle (numpy"
        " cosine over the same vectors, every substring ranked exactly).",
        "",
        *report.build_table(results),
        "",
        *report.query_table(results),
        *report.stage_table(results),
        *report.effort_table(results),
        *report.goals(results),
        *report.bounds(results),
        *report.chroma_lines(results),
        "",
        f"![cost curve](scale.png) (`docs/{PLOT.name}`: each metric against corpus size, log"
        " scales)",
        "",
        *(f"{r['size']:,} chunks: {r['load_note']}" for r in results),
    ]
    notices = {n for r in results for layout in r["layouts"].values()
               for n in layout["build"]["notices"] if n.startswith("hnsw")}  # fmt: skip
    if notices:
        lines += ["", "pgvector notices during the builds: " + "; ".join(sorted(notices)) + "."]
    return "\n".join(lines)


def run(args, out) -> None:
    if args.efforts and "vector" not in args.layouts:
        raise SystemExit("--efforts measures the vector layout: include it in --layouts")
    embedder = embedder_for(Settings.from_env(), "query")
    if embedder.model_id != DEFAULT_MODEL_ID:
        raise SystemExit(f"the workload is built for {DEFAULT_MODEL_ID}, not {embedder.model_id}")
    results_at = results_dir(args.quick)
    with embedded_postgres() as dsn:
        for size in args.sizes:
            started, monitor = time.perf_counter(), LoadMonitor(markers=[bench_dir()]).start()
            result = measure_size(dsn, embedder, size, args)
            result["load_note"] = monitor.stop().note()
            path = results_at / f"{size}.json"
            path.write_text(json.dumps(merged(result, path), indent=1))
            if size not in args.keep:
                drop_table(dsn, size)
            log.info("size %d done in %.0f s", size, time.perf_counter() - started)
    results = [json.loads(p.read_text()) for p in sorted(results_at.glob("*.json"))]
    by_size = sorted(results, key=lambda r: r["size"])
    report.plot(by_size, PLOT if out.writes else results_at / PLOT.name)
    out.section("scale", render(results, args))
