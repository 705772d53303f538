"""Every store against the exact oracle: per-query agreement, traced divergences, one column each.

The same tracing as the reference/candidate comparison (parity/tracing.py), with the oracle as
the reference side, so a store's divergences carry the same cause classification.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from candlefire_pipeline.parity import metrics
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report.model import Divergence, QueryRow
from candlefire_pipeline.parity.tracing import (
    TraceContext,
    compare_inventory,
    grounding_divergences,
    keyword_divergences,
    top_divergences,
)
from candlefire_pipeline.retrieval.retriever import TIMING_STAGES, Retrieval, Retriever


@dataclass
class OracleComparison:
    """One store traced against the oracle over a run."""

    ctx: TraceContext
    divergences: list[Divergence] = field(default_factory=list)


def start_comparison(
    retrievers: Mapping[str, Retriever], oracle: str, store: str
) -> OracleComparison:
    """Inventory of the store against the oracle (missing / changed chunks become divergences)."""
    _, inventory_divergences, ctx = compare_inventory(retrievers, oracle, store, oracle)
    return OracleComparison(ctx, inventory_divergences)


def compare_query(
    comparison: OracleComparison,
    query: ParityQuery,
    runs: dict[str, Retrieval],
) -> dict:
    """The store's agreement with the oracle on one query; its divergences are kept."""
    ctx = comparison.ctx
    oracle_run, store_run = runs[ctx.reference], runs[ctx.candidate]
    oracle_top, store_top = oracle_run.pmids, store_run.pmids
    pair = {ctx.reference: oracle_run, ctx.candidate: store_run}
    keyword = keyword_divergences(ctx, query, pair)
    grounding = grounding_divergences(ctx, query, pair)
    top = top_divergences(ctx, query, pair, oracle_top, store_top, keyword)
    comparison.divergences += top + keyword + grounding
    return {
        "overlap": metrics.overlap(store_top, oracle_top),
        "grounding_equal": store_run.grounding == oracle_run.grounding,
        "keyword_equal": set(store_run.keyword_pmids) == set(oracle_run.keyword_pmids),
    }


def stage_ms(run: Retrieval) -> dict[str, float]:
    """The retriever's stage timings in ms (every TIMING_STAGES stage but the total)."""
    return {s: run.timings.get(s, 0.0) * 1000.0 for s in TIMING_STAGES if s != "total"}


def _mean_or_none(values: Sequence[float]) -> float | None:
    return metrics.mean(values) if values else None


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50": metrics.p50(values), "p95": metrics.p95(values), "mean": metrics.mean(values)}


def store_column(
    store: str,
    rows: Sequence[QueryRow],
    queries: Sequence[ParityQuery],
    divergences: Sequence[Divergence] | None,
) -> dict:
    """One store's column: agreement with the oracle (None without one), ANN recall, latency."""
    compared = [row.vs_oracle[store] for row in rows if store in row.vs_oracle]
    with_terms = [
        row.vs_oracle[store]
        for row, query in zip(rows, queries, strict=True)
        if query.keyword_terms and store in row.vs_oracle
    ]
    checks = sum(2 * len(set(q.keyword_terms)) for q in queries) if compared else 0
    found = list(divergences or [])
    mismatches = sum(d.field == "grounding" for d in found)
    recalls = [row.ann_recall[store] for row in rows if store in row.ann_recall]
    overlaps = [c["overlap"] for c in compared]
    return {
        "mean_overlap": _mean_or_none(overlaps),
        "min_overlap": min(overlaps) if overlaps else None,
        "grounding_checks": checks,
        "grounding_mismatches": mismatches,
        "grounding_agreement": (1.0 - mismatches / checks) if checks else None,
        "keyword_agreement": _mean_or_none([float(c["keyword_equal"]) for c in with_terms]),
        "ann_recall": _mean_or_none(recalls),
        "latency_ms": _stats([row.latency_ms[store] for row in rows if store in row.latency_ms]),
        "store_latency_ms": _stats([row.store_ms[store] for row in rows if store in row.store_ms]),
        "divergences": len(found),
        "divergences_by_kind": {
            kind: sum(d.kind == kind for d in found) for kind in sorted({d.kind for d in found})
        },
    }


def stage_latency(rows: Sequence[QueryRow], backends: Sequence[str]) -> dict[str, dict]:
    """backend -> stage -> {p50, p95} in ms over the run's queries (the stage plot's bars)."""
    out: dict[str, dict] = {}
    for backend in backends:
        per_stage: dict[str, list[float]] = {}
        for row in rows:
            for stage, ms in row.stage_ms.get(backend, {}).items():
                per_stage.setdefault(stage, []).append(ms)
        out[backend] = {
            stage: {"p50": metrics.p50(v), "p95": metrics.p95(v)} for stage, v in per_stage.items()
        }
    return out
