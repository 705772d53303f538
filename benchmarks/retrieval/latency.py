"""Latency measurements of the retrieval benchmark on the synthetic 62k-chunk corpus."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from benchmarks.common.figures import chunk_recall, timed
from benchmarks.common.requests import TERM_KINDS, Request
from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import stage_effort
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.retrieval.retriever import TIMING_STAGES, Retriever
from candlefire_pipeline.retrieval.variants import term_variants


def run_requests(
    retrievers: dict[str, Retriever], requests: Sequence[Request], warmup: int = 3
) -> dict[str, dict]:
    """Full retrieve() per request, backends interleaved; stage timings and answers kept."""
    out = {name: {"timings": {s: [] for s in TIMING_STAGES}, "answers": []} for name in retrievers}
    for i, request in enumerate(requests):
        for name, retriever in retrievers.items():
            answer = retriever.retrieve(request.query, request.entities, request.terms)
            if i < warmup:
                continue
            for stage, seconds in answer.timings.items():
                out[name]["timings"][stage].append(seconds)
            out[name]["answers"].append(answer)
    return out


def ann_recall(store, oracle, vectors: np.ndarray, k: int = 15) -> float:
    """Mean share of the oracle's exact top-k chunk ids that the store's ANN returns."""
    return chunk_recall(
        store.semantic_candidates(vectors, k), oracle.semantic_candidates(vectors, k)
    )


def server_ms(store: PgVectorBackend, vectors: np.ndarray, n: int, stage: str) -> float:
    """Planning + execution ms of one semantic_candidates statement (EXPLAIN ANALYZE)."""
    binary = store.layout.quantization == "binary"
    candidates = n * store.ann.rerank_factor if binary else n
    store._session.apply(store.conn, stage_effort(store.ann, stage, candidates).gucs())
    query, params = pg_sql.semantic_query(
        store.names, Filter(), list(vectors), n, store.layout, vectors.shape[1], candidates
    )
    explain = b"EXPLAIN (ANALYZE, FORMAT JSON) " + query.as_bytes(store.conn)
    plan = store.conn.execute(explain, params).fetchone()[0][0]
    return plan["Planning Time"] + plan["Execution Time"]


def fan_out(
    store: PgVectorBackend, requests: Sequence[Request], embedder, n_single: int = 40
) -> dict[str, list]:
    """Per request: one semantic query vs the 12-name fan-out (one statement, and 12 statements).

    Client wall seconds of each call, and the server's planning + execution ms of the same
    statement; the difference is transfer and building the result rows in Python.
    """
    out: dict[str, list] = {k: [] for k in ("single", "batched", "separate", "single_srv",
                                            "batched_srv", "per_name")}  # fmt: skip
    for request in requests:
        query = embedder.embed([request.query])
        names = embedder.embed(list(request.entities))
        single, _ = timed(lambda q=query: store.semantic_candidates(q, n_single, stage="semantic"))
        batched, _ = timed(lambda v=names: store.semantic_candidates(v, 10, stage="entities"))
        per_name = [
            timed(lambda v=v: store.semantic_candidates(v[None, :], 10, stage="entities"))[0]
            for v in names
        ]
        out["single"].append(single)
        out["batched"].append(batched)
        out["separate"].append(sum(per_name))
        out["per_name"].extend(per_name)
        out["single_srv"].append(server_ms(store, query, n_single, "semantic") / 1e3)
        out["batched_srv"].append(server_ms(store, names, 10, "entities") / 1e3)
    return out


def grounding_times(store, requests: Sequence[Request], vector_of: Callable) -> dict[str, dict]:
    """Per term kind: contains() over the corpus, over abstracts, and the keyword fetch."""
    fields = ("corpus", "abstract", "keyword", "grounded")
    out = {kind: {field: [] for field in fields} for kind in TERM_KINDS}
    for request in requests:
        for kind, term in zip(TERM_KINDS, request.terms, strict=True):
            variants = term_variants(term)
            t_corpus, grounded = timed(lambda v=variants: store.contains(v))
            t_abstract, _ = timed(lambda v=variants: store.contains(v, Filter(abstract_only=True)))
            vectors = np.stack([vector_of(v) for v in variants])  # each variant ranks by its own
            t_keyword, _ = timed(lambda v=variants, m=vectors: store.substring_candidates(v, m, 10))
            out[kind]["corpus"].append(t_corpus)
            out[kind]["abstract"].append(t_abstract)
            out[kind]["keyword"].append(t_keyword)
            out[kind]["grounded"].append(grounded)
    return out


def agreement(answers: Sequence, oracle_answers: Sequence) -> dict[str, float]:
    """Top-15 PMID overlap and recall (parity-report definitions), same order, grounding."""
    overlap, recall, same_order, grounding = [], [], [], []
    for got, ref in zip(answers, oracle_answers, strict=True):
        overlap.append(metrics.overlap(got.pmids, ref.pmids))
        recall.append(metrics.recall(got.pmids, ref.pmids))
        same_order.append(got.pmids == ref.pmids)
        grounding.append(got.grounding == ref.grounding)
    return {
        "overlap": float(np.mean(overlap)),
        "recall": float(np.mean(recall)),
        "same_order": float(np.mean(same_order)),
        "grounding": float(np.mean(grounding)),
    }


def vector_memo(embedder) -> Callable[[str], np.ndarray]:
    """A text's vector, embedded on its first use only (the grounding timings share them)."""
    vectors: dict[str, np.ndarray] = {}

    def vector_of(text: str) -> np.ndarray:
        if text not in vectors:
            vectors[text] = embedder.embed([text])[0]
        return vectors[text]

    return vector_of
