"""retrieve() while `REINDEX INDEX CONCURRENTLY` rebuilds the store's indexes (what
`candlefire maintain --apply` runs): requests served, errors, latency against a quiet pass."""

from __future__ import annotations

import threading
import time

from benchmarks.common.requests import timed_answers
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.health import reindex_concurrently, table_health
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.retrieval.retriever import Retriever


def retrieve_during_reindex(dsn: str, store, embedder, requests) -> dict:
    """Rebuild the HNSW and GIN indexes on another connection while one client retrieves."""
    health = table_health(store.conn, store.names.table)
    targets = [i.name for i in health.indexes if i.method in ("hnsw", "gin")]
    retriever = Retriever(store, embedder)
    _, quiet = timed_answers(retriever, requests)
    done, spent = threading.Event(), {}

    def rebuild() -> None:
        with connect(dsn) as conn:
            for index in targets:
                started = time.perf_counter()
                reindex_concurrently(conn, index)
                spent[index] = time.perf_counter() - started
        done.set()

    worker = threading.Thread(target=rebuild, name="reindex")
    worker.start()
    seconds, errors, first_error, i = [], 0, "", 0
    while not done.is_set():
        request = requests[i % len(requests)]
        i += 1
        started = time.perf_counter()
        try:
            retriever.retrieve(request.query, request.entities, request.terms)
            seconds.append(time.perf_counter() - started)
        except Exception as exc:  # every failure is counted, the first one named
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
    worker.join()
    return {
        "indexes": spent, "served": len(seconds), "errors": errors, "first_error": first_error,
        "p50_ms": metrics.p50(seconds) * 1e3 if seconds else 0.0,
        "p95_ms": metrics.p95(seconds) * 1e3 if seconds else 0.0,
        "quiet_p95_ms": metrics.p95(quiet) * 1e3,
    }  # fmt: skip
