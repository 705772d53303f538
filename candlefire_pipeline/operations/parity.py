"""Runs the parity harness on the live stores and the exact oracle (no Dagster)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.operations.indexing import applied_batches, apply_batch, latest_applied_at
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.report import GateResult, ParityReport, evaluate_gates
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


def build_oracle(settings: Settings, embedder) -> MemoryBackend:
    """The exact oracle: every batch applied to any fed store, re-applied in batch order."""
    oracle = MemoryBackend(substring_mode=settings.substring_mode)
    keys = sorted({k for s in settings.stores for k in applied_batches(settings.batches_dir, s)})
    for key in keys:
        apply_batch(
            oracle, settings.batches_dir, key, embedder.model_id, embedder.dim, record_applied=False
        )
    log.info("oracle rebuilt from %d batches: %d chunks", len(keys), oracle.count())
    return oracle


@contextmanager
def open_stores(pgvector_resource, chroma_resource) -> Iterator[dict]:
    with ExitStack() as stack:
        yield {
            "pgvector": stack.enter_context(pgvector_resource.open()),
            "chroma": stack.enter_context(chroma_resource.open()),
        }


def run_report(
    settings: Settings, embedder, stores: dict, query_files: tuple[Path, ...] = ()
) -> ParityReport:
    """The full retriever on both stores and the oracle over the committed (+ extra) queries."""
    queries = load_queries()
    for extra in query_files:
        queries += load_queries(extra)
    backends = {**stores, "memory": build_oracle(settings, embedder)}
    reranker = load_reranker(settings.retrieval.reranker_model)
    retrievers = {
        name: Retriever(backend, embedder, settings.retrieval, reranker)
        for name, backend in backends.items()
    }
    return run_parity(
        retrievers, queries, reference="chroma", candidate="pgvector", oracle="memory"
    )


def freshness_gate(settings: Settings, report: ParityReport) -> GateResult:
    """A report older than the latest batch applied to any fed store cannot flip the switch."""
    latest = latest_applied_at(settings.batches_dir, settings.stores)
    created = datetime.fromisoformat(report.created_at.replace("Z", "+00:00")).timestamp()
    passed = latest is None or created >= latest
    return GateResult(
        name="report_is_fresh",
        passed=passed,
        value=created,
        threshold=latest or 0.0,
        detail="report is newer than the latest applied batch"
        if passed
        else "a batch was applied after this report: re-run parity_report",
    )


def all_gates(settings: Settings, report: ParityReport) -> list[GateResult]:
    return [*evaluate_gates(report, settings.parity), freshness_gate(settings, report)]
