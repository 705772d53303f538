"""The scale workload's stores, built once and reused by every scale benchmark: the pgvector
table of a size (default layout), its Chroma collection and its Qdrant local-mode collection."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from benchmarks.common.data import bench_dir
from benchmarks.common.scaled.corpus import ScaleCorpus, build_corpus
from benchmarks.common.scaled.tables import (
    ServerMemory,
    build_ann,
    load_table,
    open_layout,
    table_name,
)
from candlefire_pipeline.backends.factory import build_backend

log = logging.getLogger(__name__)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def ensure_pg_table(dsn: str, embedder, size: int) -> ScaleCorpus:
    """The corpus, its pgvector table built (default layout) unless it already holds it."""
    store = open_layout(dsn, table_name(size), "vector")
    try:
        ready = store.stored_model() == (embedder.model_id, embedder.dim) and store.count() == size
        ready = ready and store.stored_layout() == store.layout
    except Exception:  # another layout's index, a half-built table: build it again
        ready = False
    finally:
        store.close()
    if ready:
        log.info("pgvector table %s reused", table_name(size))
        store = open_layout(dsn, table_name(size), "vector")
        store.ensure_schema(embedder.model_id, embedder.dim)  # a table from before the cache
        store.clear_term_cache("a reused benchmark table starts cold")
        store.close()
        return build_corpus(embedder, size)
    memory = ServerMemory(bench_dir() / "pg")
    try:
        corpus, _ = load_table(dsn, embedder, size, memory)
        build_ann(dsn, size, "vector", memory)
    finally:
        memory.stop()
    return corpus


def chroma_path(size: int) -> Path:
    return bench_dir() / "scale_chroma" / str(size)


def open_chroma(size: int):
    return build_backend("chroma", path=chroma_path(size), collection=table_name(size))


def load_chroma(corpus: ScaleCorpus, budget_s: float | None = None) -> dict:
    """Fill the size's Chroma collection through replace_papers, slice by slice, unless it is
    full already; stops past `budget_s` seconds (then `complete` is False)."""
    store = open_chroma(corpus.size)
    try:
        if store.stored_model() == (corpus.model_id, corpus.dim) and store.count() == corpus.size:
            return {"rows": corpus.size, "seconds": None, "complete": True,
                    "bytes": folder_bytes(chroma_path(corpus.size))}  # fmt: skip
        store.reset()
        started, rows = time.perf_counter(), 0
        for part in corpus.slices(rows=5_461 * 4):
            store.replace_papers(part)
            rows += part.num_rows
            elapsed = time.perf_counter() - started
            log.info("chroma %d: %d rows in %.0f s", corpus.size, rows, elapsed)
            if budget_s is not None and elapsed > budget_s and rows < corpus.size:
                break
        seconds = time.perf_counter() - started
    finally:
        store.close()
    return {"rows": rows, "seconds": seconds, "complete": rows == corpus.size,
            "bytes": folder_bytes(chroma_path(corpus.size))}  # fmt: skip


def qdrant_path(size: int) -> Path:
    return bench_dir() / "scale_qdrant" / str(size)


def load_qdrant(corpus: ScaleCorpus, path: Path | None = None) -> float | None:
    """Fill a Qdrant local-mode folder with the corpus unless it holds it; load seconds."""
    path = path or qdrant_path(corpus.size)
    store = build_backend("qdrant", path=path, collection=table_name(corpus.size))
    try:
        if store.stored_model() == (corpus.model_id, corpus.dim) and store.count() == corpus.size:
            return None
    finally:
        store.close()
    shutil.rmtree(path, ignore_errors=True)
    store = build_backend("qdrant", path=path, collection=table_name(corpus.size))
    try:
        started = time.perf_counter()
        for part in corpus.slices():
            store.replace_papers(part)
        return time.perf_counter() - started
    finally:
        store.close()
