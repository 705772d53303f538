"""The stores a cluster uses, chosen only by environment: Chroma server, Postgres by DSN."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.deploy.conftest import standalone_postgres
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

pytestmark = pytest.mark.slow

DIM = 8
PMIDS = ("101", "202", "303")


def _rows():
    chunks = [chunk(pmid, document=f"Paper {pmid} about SPG302 and synapses") for pmid in PMIDS]
    return make_rows(chunks, unit_vectors(len(chunks), DIM, seed=7), model_id="test-model")


def _settings_from(monkeypatch, data_dir: Path, **env: str) -> Settings:
    """Settings.from_env with only these CANDLEFIRE_* variables set."""
    for key in ("CANDLEFIRE_PG_DSN", "CANDLEFIRE_CHROMA_HOST", "CANDLEFIRE_CHROMA_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(data_dir))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings.from_env()


def _write_and_read(backend) -> None:
    backend.ensure_schema("test-model", DIM)
    assert backend.replace_papers(_rows()) == len(PMIDS)
    assert backend.count() == len(PMIDS)
    assert sorted(backend.paper_hashes()) == sorted(PMIDS)
    query = unit_vectors(len(PMIDS), DIM, seed=7)[1:2]  # the vector stored for "202"
    [hits] = backend.semantic_candidates(query, n=1)
    assert hits[0]["pmid"] == "202"


def test_chroma_server_by_host_and_port(monkeypatch, tmp_path, start_chroma):
    store = tmp_path / "chroma_server_data"
    with start_chroma(store) as port:
        settings = _settings_from(
            monkeypatch,
            tmp_path / "data",
            CANDLEFIRE_CHROMA_HOST="127.0.0.1",
            CANDLEFIRE_CHROMA_PORT=str(port),
        )
        backend = open_backend("chroma", settings)
        try:
            _write_and_read(backend)
        finally:
            backend.close()
    # the rows live in the server's --path, not in the pipeline's local chroma folder
    assert not settings.chroma_path.exists()
    with start_chroma(store) as port:
        restarted = open_backend(
            "chroma",
            _settings_from(
                monkeypatch,
                tmp_path / "data",
                CANDLEFIRE_CHROMA_HOST="127.0.0.1",
                CANDLEFIRE_CHROMA_PORT=str(port),
            ),
        )
        try:
            assert restarted.stored_model() == ("test-model", DIM)
            assert restarted.has_paper("303")
            assert restarted.contains(["SPG302"], Filter(pmids=("101",)))
        finally:
            restarted.close()


@pytest.fixture(scope="module")
def external_pg():
    """A Postgres server the pipeline only knows by DSN (stands in for RDS/Aurora/Neon)."""
    with standalone_postgres("external-pg") as server:
        yield server


def test_pgvector_by_dsn_only(monkeypatch, tmp_path, external_pg):
    settings = _settings_from(monkeypatch, tmp_path / "data", CANDLEFIRE_PG_DSN=external_pg.dsn)
    backend = open_backend("pgvector", settings)
    try:
        _write_and_read(backend)
    finally:
        backend.close()
    # no embedded server was started next to the data dir
    assert not settings.pg_data_dir.exists()
    with psycopg.connect(external_pg.dsn) as conn:
        assert conn.execute(f"SELECT count(*) FROM {settings.pg_table}").fetchone()[0] == 3


def test_read_only_role_serves_but_cannot_write(monkeypatch, tmp_path, external_pg):
    """The serving app's role: SELECT on the chunk tables, nothing else (docs/DEPLOY.md)."""
    writer = _settings_from(monkeypatch, tmp_path / "data", CANDLEFIRE_PG_DSN=external_pg.dsn)
    backend = open_backend("pgvector", writer)
    try:
        backend.ensure_schema("test-model", DIM)
        backend.replace_papers(_rows())
    finally:
        backend.close()
    with psycopg.connect(external_pg.dsn, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN CREATE ROLE candlefire_reader LOGIN;"
            " EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        conn.execute("GRANT USAGE ON SCHEMA public TO candlefire_reader")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO candlefire_reader")
    reader_dsn = make_conninfo(**{**conninfo_to_dict(external_pg.dsn), "user": "candlefire_reader"})
    reader = open_backend(
        "pgvector",
        _settings_from(monkeypatch, tmp_path / "data", CANDLEFIRE_PG_DSN=reader_dsn),
    )
    try:
        assert reader.count() == len(PMIDS)
        [hits] = reader.semantic_candidates(unit_vectors(1, DIM, seed=99), n=3)
        assert {hit["pmid"] for hit in hits} == set(PMIDS)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.delete_papers(["101"])
    finally:
        reader.close()
