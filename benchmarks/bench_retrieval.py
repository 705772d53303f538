"""Retrieval quality (SciFact) and full-retrieve latency (62k chunks) on pgvector, Chroma, memory.

Run: .venv/bin/python -m benchmarks.bench_retrieval [--requests 60] [--skip-quality]
Stores and embeddings are cached under data/bench_retrieval (CANDLEFIRE_BENCH_DIR).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from benchmarks import retrieval_latency as lat
from benchmarks._report import write_section
from benchmarks.retrieval_data import (
    LATENCY_CHUNKS,
    bench_dir,
    entity_pool,
    ndcg_at,
    recall_at,
    rows_table,
    scifact_chunks,
    scifact_queries,
    scifact_records,
    synthetic_corpus,
)
from benchmarks.retrieval_data import embed_cached as cached
from benchmarks.retrieval_stores import (
    BACKENDS,
    embedded_postgres,
    ensure_indexes,
    load,
    open_store,
    set_ef_search,
    without_trigram_index,
)
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.retrieval.retriever import TIMING_STAGES, Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID

logger = logging.getLogger("bench_retrieval")
ANCHOR = "candle-fire's own retriever on embedded Chroma, 62,196 chunks: p50 4.3 s / p95 4.6 s"
EF_SWEEP = (40, 100, 200, 400, 800)
PARTS = ("quality", "latency")


def quality(embedder, dsn: str) -> tuple[list[str], dict]:
    """nDCG@10 / recall@100 of the semantic stage over the 809 SciFact training claims."""
    chunks = scifact_chunks(scifact_records())
    vectors = cached(embedder, [c["document"] for c in chunks], [c["content_hash"] for c in chunks])
    rows = rows_table(chunks, vectors, embedder.model_id, "scifact")
    queries = scifact_queries()
    qvecs = cached(embedder, [q.text for q in queries])
    figures = {}
    for name in BACKENDS:
        store = open_store(name, dsn, "scifact")
        load(store, rows, embedder.model_id, embedder.dim)
        retriever = Retriever(store, embedder)
        ndcg, recall, seconds = [], [], []
        for query, vector in zip(queries, qvecs, strict=True):
            took, found = lat.timed(lambda r=retriever, v=vector: r.search(v, n=100))
            pmids = [r["pmid"] for r in found]
            ndcg.append(ndcg_at(pmids, query.relevant))
            recall.append(recall_at(pmids, query.relevant))
            seconds.append(took)
        figures[name] = (np.mean(ndcg), np.mean(recall), seconds)
        store.close()
    oracle = figures["memory"][0]
    lines = [
        f"Semantic stage (search n=100, over-fetch 200) over {len(chunks):,} SciFact abstracts,"
        f" {len(queries)} training claims, model `{DEFAULT_MODEL_ID}` ({embedder.dim}-dim).",
        "",
        "| backend | nDCG@10 | Δ vs oracle | recall@100 | search p50 / p95 ms |",
        "|---|---|---|---|---|",
    ]
    for name, (ndcg, recall, seconds) in figures.items():
        lines.append(
            f"| {name} | {ndcg:.4f} | {ndcg - oracle:+.4f} | {recall:.4f} | {lat.ms(seconds)} |"
        )
        print(f"quality {name}: nDCG@10 {ndcg:.4f} ({ndcg - oracle:+.4f}) recall@100 {recall:.4f}")
    return lines, figures


def latency(embedder, dsn: str, n_requests: int) -> list[str]:
    """Full retrieve() per backend on LATENCY_CHUNKS synthetic chunks; stage and ANN figures."""
    records = scifact_records()
    # real embeddings of the SciFact titles (row i = records[i]) seed the synthetic vectors
    base = cached(embedder, [r["title"] for r in records])
    corpus = synthetic_corpus(records, base)
    rows = rows_table(corpus.chunks, corpus.vectors, embedder.model_id, "synthetic")
    stores = {name: open_store(name, dsn, "latency") for name in BACKENDS}
    loads = {name: load(s, rows, embedder.model_id, embedder.dim) for name, s in stores.items()}
    ensure_indexes(stores["pgvector"])
    pool = entity_pool([r["title"] for r in records])
    requests = lat.make_requests([q.text for q in scifact_queries()[:n_requests]], pool, corpus)
    retrievers = {name: Retriever(s, embedder) for name, s in stores.items()}
    lines = [
        f"Full `retrieve()` on {rows.num_rows:,} synthetic chunks (mixtures of real SciFact"
        " title embeddings + noise, normalized, ~1,000-char documents), real model for the query"
        f" and 12 entity names (one embed call), 3 grounding terms; {n_requests} requests,"
        " 3 warm-up, backends interleaved; no reranker configured (RRF order).",
        f"Load seconds (0 = reused cache): {', '.join(f'{k} {v:.0f}' for k, v in loads.items())}.",
        "",
        "p50 / p95 in ms per stage:",
        "",
        "| backend | " + " | ".join(TIMING_STAGES) + " |",
        "|---|" + "---|" * len(TIMING_STAGES),
    ]
    measured = lat.run_requests(retrievers, requests)
    for name in BACKENDS:
        cells = [lat.ms(measured[name]["timings"][s]) for s in TIMING_STAGES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = {name: measured[name]["timings"]["total"] for name in BACKENDS}
    pg50, ch50 = lat.pct(totals["pgvector"], 50), lat.pct(totals["chroma"], 50)
    lines += [
        "",
        f"Anchor: {ANCHOR}; pgvector p50 is {4.3 / pg50:.0f}x faster, p95"
        f" {4.6 / lat.pct(totals['pgvector'], 95):.0f}x; Chroma/pgvector p50 ratio in this"
        f" process: {ch50 / pg50:.2f}.",
    ]
    lines += _agreement_and_ann(stores, measured, embedder, requests)
    lines += _fan_out(stores, embedder, requests)
    lines += _grounding(stores, embedder, requests)
    for store in stores.values():
        store.close()
    return lines


def _agreement_and_ann(stores, measured, embedder, requests) -> list[str]:
    qvecs = embedder.embed([r.query for r in requests])
    lines = [
        "",
        "| backend | ANN recall@15 (chunks) | top-15 PMID overlap | same final order |"
        " grounding agree |",
        "|---|---|---|---|---|",
    ]
    for name in ("pgvector", "chroma"):
        recall = lat.ann_recall(stores[name], stores["memory"], qvecs)
        agree = lat.agreement(measured[name]["answers"], measured["memory"]["answers"])
        lines.append(
            f"| {name} | {recall:.4f} | {agree['overlap']:.4f} | {agree['same_order']:.3f} |"
            f" {agree['grounding']:.3f} |"
        )
        print(f"{name}: ANN recall@15 {recall:.4f}, agreement {agree}")
    pg = stores["pgvector"]
    lines += [
        "",
        "pgvector `hnsw.ef_search` sweep (iterative_scan relaxed_order, single query):",
        "",
        "| ef_search | recall@15 | semantic p50 / p95 ms |",
        "|---|---|---|",
    ]
    for ef in EF_SWEEP:
        set_ef_search(pg, ef)
        recall = lat.ann_recall(pg, stores["memory"], qvecs)
        lines.append(f"| {ef} | {recall:.4f} | {lat.ms(lat.single_query_times(pg, qvecs))} |")
    set_ef_search(pg, pg.ef_search)
    return lines


def _fan_out(stores, embedder, requests) -> list[str]:
    vectors = [embedder.embed(list(r.entities)) for r in requests[:30]]
    lines = [
        "",
        "Entity fan-out, 12 names x 10 hits (p50 / p95 ms):",
        "",
        "| backend | 12 round trips | 1 batched call | ratio (p50) |",
        "|---|---|---|---|",
    ]
    for name, store in stores.items():
        t = lat.fan_out(store, vectors)
        ratio = lat.pct(t["separate"], 50) / lat.pct(t["batched"], 50)
        lines.append(f"| {name} | {lat.ms(t['separate'])} | {lat.ms(t['batched'])} | {ratio:.2f} |")
    return lines


def _grounding(stores, embedder, requests) -> list[str]:
    vecs = {}

    def vector_of(text: str):
        if text not in vecs:
            vecs[text] = embedder.embed([text])[0]
        return vecs[text]

    sample = requests[:40]
    runs = {name: lat.grounding_times(store, sample, vector_of) for name, store in stores.items()}
    with without_trigram_index(stores["pgvector"]):
        runs["pgvector, no trigram index"] = lat.grounding_times(
            stores["pgvector"], sample, vector_of
        )
    lines = [
        "",
        "Substring / grounding per term (p50 / p95 ms; contains() over all chunks, over"
        " abstracts, keyword fetch of 40):",
        "",
        "| backend | term kind | grounded | corpus | abstract | keyword |",
        "|---|---|---|---|---|---|",
    ]
    for name, kinds in runs.items():
        for kind, t in kinds.items():
            share = np.mean(t["grounded"])
            lines.append(
                f"| {name} | {kind} | {share:.0%} | {lat.ms(t['corpus'])} |"
                f" {lat.ms(t['abstract'])} | {lat.ms(t['keyword'])} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    embedder = load_embedder(DEFAULT_MODEL_ID)
    with embedded_postgres() as dsn:
        if not args.skip_quality:
            started = time.perf_counter()
            lines, _ = quality(embedder, dsn)
            save_part("quality", ["### Quality (SciFact)", "", *lines])
            logger.info("quality done in %.0f s", time.perf_counter() - started)
        if not args.skip_latency:
            started = time.perf_counter()
            lines = latency(embedder, dsn, args.requests)
            save_part("latency", [f"### Latency ({LATENCY_CHUNKS:,} chunks)", "", *lines])
            logger.info("latency done in %.0f s", time.perf_counter() - started)
    markdown = "\n\n".join(
        path.read_text() for part in PARTS if (path := bench_dir() / f"{part}.md").exists()
    )
    print(markdown)
    write_section("retrieval", "## Retrieval\n\n" + markdown)


def save_part(part: str, lines: list[str]) -> None:
    """Keep each part's latest figures, so a run of one part does not drop the other."""
    (bench_dir() / f"{part}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
