"""SciFact quality of the semantic stage per store against the exact oracle (one shared loop)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from benchmarks.common.data import embed_cached as cached
from benchmarks.common.data import (
    ndcg_at,
    recall_at,
    scifact_chunks,
    scifact_queries,
    scifact_records,
)
from benchmarks.common.figures import ms, timed
from benchmarks.common.stores import load
from candlefire_pipeline.corpus.schema import store_rows
from candlefire_pipeline.retrieval.retriever import Retriever

HEADER = [
    "| store | nDCG@10 | Δ vs oracle | recall@100 | search p50 / p95 ms |",
    "|---|---|---|---|---|",
]


def measure(
    embedder, names: Iterable[str], open_store: Callable[[str], object], docs: int | None = None
) -> dict:
    """name -> (nDCG@10, recall@100, search seconds) over the 809 SciFact training claims, on
    the SciFact corpus (or its first `docs` abstracts: a quick run's figures, not comparable)."""
    chunks = scifact_chunks(scifact_records(docs))
    vectors = cached(embedder, [c["document"] for c in chunks], [c["content_hash"] for c in chunks])
    rows = store_rows(chunks, vectors, "scifact", embedder.model_id)
    queries = scifact_queries()
    qvecs = cached(embedder, [q.text for q in queries])
    figures = {"corpus": len(chunks), "queries": len(queries)}
    for name in names:
        store = open_store(name)
        load(store, rows, embedder.model_id, embedder.dim)
        retriever = Retriever(store, embedder)
        ndcg, recall, seconds = [], [], []
        for query, vector in zip(queries, qvecs, strict=True):
            took, found = timed(lambda r=retriever, v=vector: r.search(v, n=100))
            pmids = [r["pmid"] for r in found]
            ndcg.append(ndcg_at(pmids, query.relevant))
            recall.append(recall_at(pmids, query.relevant))
            seconds.append(took)
        figures[name] = (float(np.mean(ndcg)), float(np.mean(recall)), seconds)
        store.close()
    return figures


def table(figures: dict, oracle: str = "memory") -> list[str]:
    """The markdown rows of `measure`'s figures, each store against the oracle's nDCG@10."""
    base = figures[oracle][0]
    stores = {k: v for k, v in figures.items() if k not in ("corpus", "queries")}
    return HEADER + [
        f"| {name} | {ndcg:.4f} | {ndcg - base:+.4f} | {recall:.4f} | {ms(seconds)} |"
        for name, (ndcg, recall, seconds) in stores.items()
    ]
