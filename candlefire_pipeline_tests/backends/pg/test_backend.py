"""Postgres-only behaviour: transactions, the bulk path, indexes, identifiers, DSN secrecy."""

from __future__ import annotations

import psycopg
import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8


def index_names(store: PgVectorBackend) -> set[str]:
    rows = store.conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s", [store.names.table]
    ).fetchall()
    return {r[0] for r in rows}


def test_failed_replace_rolls_back_the_delete(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(make_rows([chunk("1"), chunk("2")], unit_vectors(2, DIM)))
    # Postgres text cannot hold NUL: the COPY fails after the DELETE ran in the same transaction
    bad = make_rows([chunk("1", paper_hash="new", document="bad \x00 byte")], unit_vectors(1, DIM))
    with pytest.raises(psycopg.Error):
        store.replace_papers(bad)
    assert store.paper_hashes() == {"1": "p-1", "2": "p-2"}
    assert store.count() == 2


def test_bulk_first_load_rebuilds_indexes_and_matches_incremental(make_backend):
    chunks = [chunk(str(i), document=f"doc {i} SPG{i}") for i in range(30)]
    vectors = unit_vectors(30, DIM, seed=5)
    bulk = make_backend("pgvector", bulk_rebuild_rows=10)
    small = make_backend("pgvector", bulk_rebuild_rows=10_000)
    for store in (bulk, small):
        store.replace_papers(make_rows(chunks, vectors))
    expected = {
        f"{bulk.names.table}_pkey", f"{bulk.names.table}_pmid_chunk",
        f"{bulk.names.table}_document_trgm", f"{bulk.names.table}_embedding_hnsw",
        f"{bulk.names.table}_seq",
    }  # fmt: skip
    assert index_names(bulk) == expected
    query = unit_vectors(2, DIM, seed=6)
    assert bulk.semantic_candidates(query, 5) == small.semantic_candidates(query, 5)
    assert bulk.fetch(Filter()) == small.fetch(Filter())
    # a second large batch into the now non-empty table takes the incremental path
    bulk.replace_papers(make_rows(chunks[:12], vectors[:12], batch_key="b2"))
    assert bulk.count() == 30 and index_names(bulk) == expected


def test_substring_search_uses_the_trigram_index(make_backend):
    store = make_backend("pgvector")
    chunks = [chunk(str(i), document=f"filler text number {i} " * 5) for i in range(300)]
    store.replace_papers(make_rows(chunks, unit_vectors(300, DIM)))
    store.conn.execute(pg_sql.sql.SQL("ANALYZE {}").format(store.names.ident()))
    query, params = pg_sql.substring_query(
        store.names, ["number 42 ", "number 7 "], "like", Filter(), list(unit_vectors(2, DIM)), 5
    )
    store.conn.execute("SET enable_seqscan = off")  # small table: make the plan choice explicit
    plan = store.conn.execute(b"EXPLAIN " + query.as_bytes(store.conn), params).fetchall()
    store.conn.execute("RESET enable_seqscan")
    trigram_scans = [line[0] for line in plan if f"{store.names.table}_document_trgm" in line[0]]
    assert len(trigram_scans) == 2  # one per variant, never an HNSW walk with a post-filter
    assert not any(f"{store.names.table}_embedding_hnsw" in line[0] for line in plan)


@pytest.mark.parametrize("table", ["Chunks", "chunks; drop table x", "a" * 41, "1abc", ""])
def test_table_names_are_validated(pg_dsn, table):
    with pytest.raises(ValueError, match="table name"):
        PgVectorBackend(pg_dsn, table=table)


def test_connection_error_never_shows_the_password(tmp_path):
    dsn = f"postgresql://alice:s3cr3t-pw@/db?host={tmp_path}&port=1"
    with pytest.raises(BackendUnavailableError) as caught:
        PgVectorBackend(dsn)
    assert "s3cr3t-pw" not in str(caught.value)
    assert "cannot connect" in str(caught.value)
    with pytest.raises(BackendUnavailableError) as caught:
        PgVectorBackend("host=x password=s3cr3t-pw port=")
    assert "s3cr3t-pw" not in str(caught.value)


def test_model_contract_is_shared_between_connections(make_backend, pg_dsn):
    store = make_backend("pgvector")
    store.ensure_schema("model-a", DIM)
    other = PgVectorBackend(pg_dsn, table=store.names.table)
    try:
        assert other.stored_model() == ("model-a", DIM)
        with pytest.raises(ValueError, match="model-a"):
            other.ensure_schema("model-b", DIM)
    finally:
        other.close()


def test_reset_forgets_the_model(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(make_rows([chunk("1")], unit_vectors(1, DIM)))
    store.reset()
    assert store.stored_model() is None and store.count() == 0
    store.ensure_schema("new", DIM * 2)
    assert store.stored_model() == ("new", DIM * 2)
