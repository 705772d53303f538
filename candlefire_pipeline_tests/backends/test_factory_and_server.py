"""open_backend by name, and the embedded Postgres shared between processes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import psycopg
import pytest

from candlefire_pipeline.backends import factory
from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline.backends.factory import open_backend, resolve_dsn
from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.qdrant.backend import QdrantBackend
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import pg_data_root


@pytest.fixture
def settings(tmp_path, pg_dsn) -> Settings:
    base = Settings.from_env().with_data_dir(tmp_path)
    return replace(
        base, pg_dsn=pg_dsn, pg_table="factory_chunks", substring_mode="like", chroma_host=None
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("pgvector", PgVectorBackend),
        ("chroma", ChromaBackend),
        ("qdrant", QdrantBackend),
        ("memory", MemoryBackend),
    ],
)
def test_open_backend_by_name(settings, name, kind):
    store = open_backend(name, settings)
    try:
        assert isinstance(store, kind) and store.name == name
        assert store.count() == 0
    finally:
        if isinstance(store, PgVectorBackend):
            store.reset()
        store.close()


def test_open_backend_rejects_unknown_name_and_keeps_chroma_case_sensitive(settings):
    with pytest.raises(ValueError, match="unknown backend"):
        open_backend("milvus", settings)
    with pytest.raises(ValueError, match="ilike"):
        ChromaBackend(path=settings.chroma_path, substring_mode="ilike")
    chroma = open_backend("chroma", replace(settings, substring_mode="ilike"))
    assert chroma.substring_mode == "like"
    chroma.close()
    assert (
        open_backend("memory", replace(settings, substring_mode="ilike")).substring_mode == "ilike"
    )
    with pytest.raises(ValueError, match="case-sensitive"):
        QdrantBackend(path=settings.qdrant_path, substring_mode="ilike")
    qdrant = open_backend("qdrant", replace(settings, substring_mode="ilike"))
    assert qdrant.substring_mode == "like" and qdrant.local
    qdrant.close()


def test_resolve_dsn_prefers_the_configured_dsn(settings):
    assert resolve_dsn(settings) == settings.pg_dsn


@pytest.fixture
def pg_dir():
    with pg_data_root() as root:
        yield root / "pg"


def test_embedded_server_is_reused_across_processes_and_stoppable(pg_dir):
    server = EmbeddedPostgres(pg_dir)
    assert not server.is_running()
    dsn = server.dsn
    pid = server.pid
    code = (
        "from pathlib import Path; from candlefire_pipeline.backends.pg.server import "
        f"EmbeddedPostgres as E; s = E(Path({str(pg_dir)!r})); print(s.dsn, s.pid)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [dsn, str(pid)]  # the child attached to the running server
    with psycopg.connect(dsn) as conn:  # and its exit did not stop it
        assert conn.execute("SELECT 1").fetchone() == (1,)
    server.stop()
    assert not server.is_running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=3)
    assert EmbeddedPostgres(pg_dir).dsn  # starts again on demand
    EmbeddedPostgres(pg_dir).stop()


def test_opened_backend_closes_the_store_when_the_block_ends_or_raises(tmp_path, monkeypatch):
    opened = []

    class Store:
        closed = False

        def close(self) -> None:
            self.closed = True

    def fake_open(name, settings):
        opened.append(Store())
        return opened[-1]

    monkeypatch.setattr(factory, "open_backend", fake_open)
    settings = Settings.from_env().with_data_dir(tmp_path)
    with factory.opened_backend("chroma", settings) as store:
        assert not store.closed
    assert store.closed
    with pytest.raises(RuntimeError, match="boom"):
        with factory.opened_backend("memory", settings):
            raise RuntimeError("boom")
    assert [s.closed for s in opened] == [True, True]
