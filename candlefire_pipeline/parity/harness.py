"""Dual-read validation: the same queries through the full retriever on every backend.

Reference (Chroma, what serves today) and candidate (pgvector) are compared query by query;
the exact in-memory oracle tells an approximate-search miss from a real disagreement and gives
each backend's ANN recall. Every disagreement is listed with the cause it was traced to
(parity/tracing.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from candlefire_pipeline.parity import metrics
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report import Divergence, ParityReport, QueryRow
from candlefire_pipeline.parity.tracing import (
    TraceContext,
    compare_inventory,
    grounding_divergences,
    keyword_divergences,
    top_divergences,
)
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever

log = logging.getLogger(__name__)

TOP_K = 15


def run_parity(
    retrievers: Mapping[str, Retriever],
    queries: Sequence[ParityQuery],
    reference: str = "chroma",
    candidate: str = "pgvector",
    oracle: str | None = "memory",
    top_k: int = TOP_K,
) -> ParityReport:
    """Run every query through retrieve() on every backend and compare candidate to reference.

    The oracle is optional (None or absent skips ANN recall and ann_miss tracing). One untimed
    warm-up retrieve per backend keeps connection setup out of the latency figures; the backend
    order rotates per query so no backend always runs on a cold cache.
    """
    for name in (reference, candidate):
        if name not in retrievers:
            raise ValueError(f"no retriever for {name!r}; have {sorted(retrievers)}")
    if oracle is not None and oracle not in retrievers:
        oracle = None
    if not queries:
        raise ValueError("run_parity needs at least one query")
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate query ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    names = list(retrievers)
    chunk_counts = {name: retrievers[name].backend.count() for name in names}
    inventory, inventory_divergences, ctx = compare_inventory(
        retrievers, reference, candidate, oracle
    )
    _warm_up(retrievers, queries[0])
    rows, divergences = [], []
    latencies: dict[str, list[float]] = {name: [] for name in names}
    store_latencies: dict[str, list[float]] = {name: [] for name in names}
    for position, query in enumerate(queries):
        order = names[position % len(names) :] + names[: position % len(names)]
        runs, seconds = {}, {}
        for name in order:
            started = time.perf_counter()
            runs[name] = retrievers[name].retrieve(query.text, query.entities, query.terms)
            seconds[name] = time.perf_counter() - started
        row, found = _compare(ctx, query, runs, seconds, top_k)
        for name in names:
            latencies[name].append(row.latency_ms[name])
            store_latencies[name].append(row.store_ms[name])
        rows.append(row)
        divergences += found
    divergences += inventory_divergences
    created = datetime.now(UTC)
    report = ParityReport(
        report_id=created.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8],
        created_at=created.isoformat(),
        reference=reference,
        candidate=candidate,
        oracle=oracle,
        backends=names,
        queries=rows,
        aggregates=_aggregates(rows, queries, latencies, store_latencies, divergences, oracle),
        divergences=divergences,
        chunk_counts=chunk_counts,
        inventory=inventory,
    )
    log.info("parity report %s: %s", report.report_id, report.headline())
    return report


def _warm_up(retrievers: Mapping[str, Retriever], query: ParityQuery) -> None:
    for retriever in retrievers.values():
        retriever.retrieve(query.text, query.entities, query.terms)


def _compare(
    ctx: TraceContext,
    query: ParityQuery,
    runs: dict[str, Retrieval],
    seconds: dict[str, float],
    top_k: int,
) -> tuple[QueryRow, list[Divergence]]:
    ref, cand = runs[ctx.reference], runs[ctx.candidate]
    ref_top, cand_top = ref.pmids[:top_k], cand.pmids[:top_k]
    keyword = keyword_divergences(ctx, query, runs)
    grounding = grounding_divergences(ctx, query, runs)
    top = top_divergences(ctx, query, runs, ref_top, cand_top, keyword)
    row = QueryRow(
        query_id=query.id,
        text=query.text,
        top={name: run.pmids[:top_k] for name, run in runs.items()},
        overlap=metrics.overlap(cand_top, ref_top),
        jaccard=metrics.jaccard(cand_top, ref_top),
        recall=metrics.recall(cand_top, ref_top),
        rbo=metrics.rbo(ref_top, cand_top),
        grounding_equal=ref.grounding == cand.grounding,
        keyword_equal=set(ref.keyword_pmids) == set(cand.keyword_pmids),
        latency_ms={name: s * 1000.0 for name, s in seconds.items()},
        # the query embedding is the same model call on every backend: leave it out
        store_ms={
            name: max(seconds[name] - run.timings.get("embed", 0.0), 0.0) * 1000.0
            for name, run in runs.items()
        },
        ann_recall=_ann_recall(ctx, query, top_k),
    )
    return row, top + keyword + grounding


def _ann_recall(ctx: TraceContext, query: ParityQuery, k: int) -> dict[str, float]:
    """Chunk-level recall@k of each backend's semantic search against the oracle's exact top-k."""
    if ctx.oracle is None:
        return {}
    oracle = ctx.retrievers[ctx.oracle]
    vector = oracle.embedder.embed([query.text])[0][None, :]
    exact = [r["chunk_id"] for r in oracle.backend.semantic_candidates(vector, k)[0]]
    return {
        name: metrics.recall(
            [r["chunk_id"] for r in retriever.backend.semantic_candidates(vector, k)[0]], exact
        )
        for name, retriever in ctx.retrievers.items()
        if name != ctx.oracle
    }


def _aggregates(
    rows: list[QueryRow],
    queries: Sequence[ParityQuery],
    latencies: dict[str, list[float]],
    store_latencies: dict[str, list[float]],
    divergences: list[Divergence],
    oracle: str | None,
) -> dict:
    """Run-level figures; agreement ratios are 1.0 when there was nothing to compare."""
    mismatches = sum(d.field == "grounding" for d in divergences)
    checks = sum(2 * len(set(q.terms)) for q in queries)  # corpus + abstract per distinct term
    overlaps = [row.overlap for row in rows]
    with_terms = [row for row, q in zip(rows, queries, strict=True) if q.terms]
    return {
        "queries": len(rows),
        "mean_overlap": metrics.mean(overlaps),
        "min_overlap": min(overlaps),
        "mean_jaccard": metrics.mean([row.jaccard for row in rows]),
        "mean_recall": metrics.mean([row.recall for row in rows]),
        "mean_rbo": metrics.mean([row.rbo for row in rows]),
        "grounding_checks": checks,
        "grounding_mismatches": mismatches,
        "grounding_agreement": 1.0 - mismatches / checks if checks else 1.0,
        "keyword_queries": len(with_terms),
        "keyword_agreement": (
            metrics.mean([float(row.keyword_equal) for row in with_terms]) if with_terms else 1.0
        ),
        "latency_ms": _latency_stats(latencies),
        "store_latency_ms": _latency_stats(store_latencies),
        "ann_recall": {
            name: metrics.mean([row.ann_recall[name] for row in rows])
            for name in (rows[0].ann_recall if oracle else {})
        },
        "divergences_by_kind": {
            kind: sum(d.kind == kind for d in divergences)
            for kind in sorted({d.kind for d in divergences})
        },
    }


def _latency_stats(latencies: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {"p50": metrics.p50(v), "p95": metrics.p95(v), "mean": metrics.mean(v)}
        for name, v in latencies.items()
    }
