"""Dual-read validation: the same queries through the full retriever on every store.

Reference (Chroma, what serves today) and candidate (pgvector) are compared query by query:
that comparison is what the gates judge. Every store, those two and any evaluated one (Qdrant),
is also compared with the exact in-memory oracle, which tells an approximate-search miss from a
real disagreement and gives each store its own column. Every disagreement is listed with the
cause it was traced to (parity/tracing.py). An evaluated store that fails is left out of the run
with the reason; it never fails the report.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from candlefire_pipeline.parity import columns, metrics
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report.model import Divergence, ParityReport, QueryRow
from candlefire_pipeline.parity.tracing import (
    TraceContext,
    compare_inventory,
    grounding_divergences,
    keyword_divergences,
    top_divergences,
)
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.stores import CANDIDATE, ORACLE, REFERENCE

log = logging.getLogger(__name__)

#: chunk-level ANN recall@k of the semantic search against the exact oracle
TOP_K = 15


class _Run:
    """The backends still in a run, and the evaluated ones that dropped out (with why)."""

    def __init__(self, retrievers: Mapping[str, Retriever], gated: set[str]) -> None:
        self.retrievers = dict(retrievers)
        self.gated = gated
        self.unavailable: dict[str, str] = {}

    @property
    def names(self) -> list[str]:
        return list(self.retrievers)

    def guarded(self, name: str, call: Callable[[], object]) -> tuple[bool, object]:
        """(True, result), or (False, None) when an evaluated store failed and was dropped."""
        if name in self.gated:
            return True, call()
        try:
            return True, call()
        except Exception as exc:  # any failure of an evaluated store drops it
            log.warning("evaluated store %s left out of the parity run: %s", name, exc)
            self.unavailable[name] = f"{type(exc).__name__}: {exc}"
            self.retrievers.pop(name, None)
            return False, None


def run_parity(
    retrievers: Mapping[str, Retriever],
    queries: Sequence[ParityQuery],
    reference: str = REFERENCE,
    candidate: str = CANDIDATE,
    oracle: str | None = ORACLE,
    top_k: int = TOP_K,
) -> ParityReport:
    """Run every query through retrieve() on every backend; compare candidate to reference and
    every store to the oracle.

    The oracle is optional (None or absent skips ANN recall, the store columns' agreement and
    ann_miss tracing). One untimed warm-up retrieve per backend keeps connection setup out of
    the latency figures; the backend order rotates per query so no backend always runs cold.
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
    run = _Run(retrievers, {reference, candidate} | ({oracle} if oracle else set()))
    chunk_counts = {}
    for name in run.names:
        ok, count = run.guarded(name, retrievers[name].backend.count)
        if ok:
            chunk_counts[name] = count
    inventory, inventory_divergences, ctx = compare_inventory(
        retrievers, reference, candidate, oracle
    )
    comparisons = _start_comparisons(run, oracle)
    for name in run.names:
        run.guarded(name, lambda r=run.retrievers[name]: _warm_up(r, queries[0]))
    rows, divergences = [], []
    for position, query in enumerate(queries):
        runs, seconds = _retrieve_all(run, query, position)
        row, found = compare_runs(ctx, query, runs, seconds)
        _compare_with_oracle(run, comparisons, row, query, runs, top_k)
        rows.append(row)
        divergences += found
    divergences += inventory_divergences
    names = run.names
    _forget(rows, run.unavailable)
    store_divergences = {s: c.divergences for s, c in comparisons.items() if s in names}
    created = datetime.now(UTC)
    report = ParityReport(
        report_id=created.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8],
        created_at=created.isoformat(),
        reference=reference,
        candidate=candidate,
        oracle=oracle,
        backends=names,
        queries=rows,
        aggregates=_aggregates(rows, queries, divergences, oracle, names, store_divergences),
        divergences=divergences,
        chunk_counts={n: c for n, c in chunk_counts.items() if n in names},
        inventory=inventory,
        store_divergences=store_divergences,
        unavailable=run.unavailable,
    )
    log.info("parity report %s: %s", report.report_id, report.headline())
    return report


def _start_comparisons(run: _Run, oracle: str | None) -> dict[str, columns.OracleComparison]:
    if oracle is None:
        return {}
    out = {}
    for store in [n for n in run.names if n != oracle]:
        ok, comparison = run.guarded(
            store, lambda s=store: columns.start_comparison(run.retrievers, oracle, s)
        )
        if ok:
            out[store] = comparison
    return out


def _warm_up(retriever: Retriever, query: ParityQuery) -> None:
    retriever.retrieve(query.text, query.entities, query.terms)


def _retrieve_all(
    run: _Run, query: ParityQuery, position: int
) -> tuple[dict[str, Retrieval], dict[str, float]]:
    names = run.names
    order = names[position % len(names) :] + names[: position % len(names)]
    runs, seconds = {}, {}
    for name in order:
        retriever = run.retrievers[name]
        started = time.perf_counter()
        ok, answer = run.guarded(
            name, lambda r=retriever: r.retrieve(query.text, query.entities, query.terms)
        )
        if ok:
            seconds[name] = time.perf_counter() - started
            runs[name] = answer
    return runs, seconds


def compare_runs(
    ctx: TraceContext,
    query: ParityQuery,
    runs: dict[str, Retrieval],
    seconds: dict[str, float],
) -> tuple[QueryRow, list[Divergence]]:
    ref, cand = runs[ctx.reference], runs[ctx.candidate]
    # the papers the app cites: the boosted top 15 plus any landscape-only keyword hits
    ref_top, cand_top = ref.pmids, cand.pmids
    keyword = keyword_divergences(ctx, query, runs)
    grounding = grounding_divergences(ctx, query, runs)
    top = top_divergences(ctx, query, runs, ref_top, cand_top, keyword)
    row = QueryRow(
        query_id=query.id,
        text=query.text,
        top={name: run.pmids for name, run in runs.items()},
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
        stage_ms={name: columns.stage_ms(run) for name, run in runs.items()},
    )
    return row, top + keyword + grounding


def _compare_with_oracle(
    run: _Run,
    comparisons: dict[str, columns.OracleComparison],
    row: QueryRow,
    query: ParityQuery,
    runs: dict[str, Retrieval],
    top_k: int,
) -> None:
    """Each store's agreement with the oracle and its ANN recall, into the row."""
    if not comparisons:
        return
    oracle = next(iter(comparisons.values())).ctx.reference
    exact = _exact_top(run.retrievers[oracle], query, top_k)
    for store, comparison in comparisons.items():
        if store not in runs or store not in run.retrievers:
            continue
        ok, agreement = run.guarded(
            store, lambda c=comparison: columns.compare_query(c, query, runs)
        )
        if ok:
            ok, recall = run.guarded(store, lambda s=store: _ann_recall(run, s, exact))
        if ok:
            row.vs_oracle[store], row.ann_recall[store] = agreement, recall


def _exact_top(oracle: Retriever, query: ParityQuery, k: int) -> tuple:
    vector = oracle.embedder.embed([query.text])[0][None, :]
    return vector, [r["chunk_id"] for r in oracle.backend.semantic_candidates(vector, k)[0]]


def _ann_recall(run: _Run, store: str, exact: tuple) -> float:
    """Chunk-level recall@k of the store's semantic search against the oracle's exact top-k."""
    vector, wanted = exact
    found = run.retrievers[store].backend.semantic_candidates(vector, len(wanted) or 1)[0]
    return metrics.recall([r["chunk_id"] for r in found], wanted)


def _forget(rows: list[QueryRow], unavailable: Mapping[str, str]) -> None:
    """Take stores that dropped out mid-run out of every row (a column is all or nothing)."""
    for row in rows:
        for table in (row.top, row.latency_ms, row.store_ms, row.stage_ms, row.vs_oracle,
                      row.ann_recall):  # fmt: skip
            for name in unavailable:
                table.pop(name, None)


def _aggregates(
    rows: list[QueryRow],
    queries: Sequence[ParityQuery],
    divergences: list[Divergence],
    oracle: str | None,
    names: list[str],
    store_divergences: dict[str, list[Divergence]],
) -> dict:
    """Run-level figures; agreement ratios are 1.0 when there was nothing to compare."""
    mismatches = sum(d.field == "grounding" for d in divergences)
    checks = sum(
        2 * len(set(q.keyword_terms)) for q in queries
    )  # corpus + abstract per distinct term
    overlaps = [row.overlap for row in rows]
    with_terms = [row for row, q in zip(rows, queries, strict=True) if q.keyword_terms]
    stores = [n for n in names if n != oracle]
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
        "latency_ms": _latency_stats(rows, names, "latency_ms"),
        "store_latency_ms": _latency_stats(rows, names, "store_ms"),
        "stage_latency_ms": columns.stage_latency(rows, names),
        "ann_recall": {
            name: metrics.mean([row.ann_recall[name] for row in rows])
            for name in stores
            if oracle and all(name in row.ann_recall for row in rows)
        },
        "divergences_by_kind": {
            kind: sum(d.kind == kind for d in divergences)
            for kind in sorted({d.kind for d in divergences})
        },
        "stores": {
            store: columns.store_column(store, rows, queries, store_divergences.get(store))
            for store in stores
        },
    }


def _latency_stats(rows: list[QueryRow], names: list[str], attr: str) -> dict[str, dict]:
    out = {}
    for name in names:
        values = [getattr(row, attr)[name] for row in rows]
        out[name] = {"p50": metrics.p50(values), "p95": metrics.p95(values),
                     "mean": metrics.mean(values)}  # fmt: skip
    return out
