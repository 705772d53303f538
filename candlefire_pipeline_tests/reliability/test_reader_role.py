"""Security: serving reads work as a SELECT-only role; every write is refused by Postgres."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import errors
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.backends.base import DimensionMismatchError, Filter
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.machine import ROLLBACK, transition
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

DOCS = {
    "11": "SPG302 restores synapses in ALS mice",
    "12": "TDP-43 aggregates in motor neurons of ALS patients",
    "13": "Riluzole extends survival modestly in ALS",
    "14": "Edaravone slows functional decline",
}

#: What docs/RELIABILITY.md recommends; {role}, {db}, {table} are filled per test.
READER_SQL = [
    "CREATE ROLE {role} LOGIN",
    "GRANT CONNECT ON DATABASE {db} TO {role}",
    "GRANT USAGE ON SCHEMA public TO {role}",
    "GRANT SELECT ON {table}, {table}_meta TO {role}",
]


@pytest.fixture
def owner(make_backend):
    """The writer's store (owned by the superuser) with a few papers in it."""
    embedder = HashingEmbedder(dim=64)
    backend = make_backend("pgvector")
    rows = make_rows(
        [chunk(p, document=d, year=2000 + int(p)) for p, d in DOCS.items()],
        embedder.embed(list(DOCS.values())),
        model_id=embedder.model_id,
    )
    backend.replace_papers(rows)
    return backend


def _role(pg_dsn: str, table: str, extra: list[str] = ()) -> tuple[str, str]:
    role = f"cf_reader_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        db = admin.execute("SELECT current_database()").fetchone()[0]
        for statement in [*READER_SQL, *extra]:
            admin.execute(statement.format(role=role, db=db, table=table))
    return role, make_conninfo(pg_dsn, user=role)


@pytest.fixture
def reader_dsn(pg_dsn, owner):
    role, dsn = _role(pg_dsn, owner.names.table)
    yield dsn
    _drop_role(pg_dsn, role)


def _drop_role(pg_dsn: str, role: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {role}")  # revokes its grants
        admin.execute(f"DROP ROLE {role}")


def _reads(backend: PgVectorBackend) -> dict:
    embedder = HashingEmbedder(dim=64)
    query = embedder.embed(["ALS synapses"])
    retrieval = Retriever(backend, embedder).retrieve(
        "ALS synapses", entity_names=["TDP-43"], terms=["SPG302", "Riluzole"]
    )
    return {
        "count": backend.count(),
        "model": backend.stored_model(),
        "hashes": backend.chunk_hashes(),
        "papers": backend.paper_hashes(),
        "has": backend.has_paper("12"),
        "semantic": backend.semantic_candidates(query, 3),
        "substring": backend.substring_candidates(["ALS"], query[:1], 10),
        "contains": backend.contains(["TDP-43"], Filter(abstract_only=True)),
        "fetch": backend.fetch(Filter(pmids=("11", "13"))),
        "retrieve": (retrieval.pmids, retrieval.grounding),
    }


def test_reader_role_serves_every_read_and_is_refused_every_write(owner, reader_dsn):
    reader = build_backend("pgvector", reader_dsn, table=owner.names.table)
    reads = _reads(reader)
    assert reads == _reads(owner)
    assert reads["count"] == len(DOCS) and reads["retrieve"][0]  # not vacuously equal
    new = make_rows([chunk("99")], HashingEmbedder(dim=64).embed(["x"]), model_id="hashing-v1")
    for write in (
        lambda: reader.replace_papers(new),
        lambda: reader.delete_papers(["11"]),
        reader.reset,
    ):
        with pytest.raises(errors.InsufficientPrivilege):
            write()
    with pytest.raises(DimensionMismatchError):
        reader.ensure_schema("another-model", 32)  # refused before any SQL write
    assert _reads(reader) == reads  # each failed write rolled back; the connection still serves
    assert owner.count() == len(DOCS)
    reader.close()


def test_reader_on_read_only_transactions_can_open_the_store(pg_dsn, owner):
    role, dsn = _role(
        pg_dsn, owner.names.table, ["ALTER ROLE {role} SET default_transaction_read_only = on"]
    )
    try:
        reader = build_backend("pgvector", dsn, table=owner.names.table)
        assert reader.count() == len(DOCS)
        reader.close()
    finally:
        _drop_role(pg_dsn, role)


def test_read_only_transactions_do_refuse_writes(pg_dsn, owner):
    """Guards the test above: the read-only role is real (its writes fail at the server)."""
    role, dsn = _role(
        pg_dsn, owner.names.table, ["ALTER ROLE {role} SET default_transaction_read_only = on"]
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            count = conn.execute(f"SELECT count(*) FROM {owner.names.table}").fetchone()[0]
            assert count == len(DOCS)
            with pytest.raises(errors.ReadOnlySqlTransaction):
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    finally:
        _drop_role(pg_dsn, role)


def test_reader_role_can_read_the_switch_history(pg_dsn, owner, tmp_path):
    settings = Settings(data_dir=tmp_path, drops_dir=tmp_path / "drops")
    transition(settings, ROLLBACK, "history exists", "test", dsn=pg_dsn)
    role, dsn = _role(
        pg_dsn, owner.names.table, ["GRANT SELECT ON serving_backend_history TO {role}"]
    )
    try:
        assert history(dsn) == history(pg_dsn)
    finally:
        _drop_role(pg_dsn, role)


def test_ensure_reader_role_serves_reads_and_refuses_writes(pg_dsn, owner):
    role = f"cf_reader_{uuid.uuid4().hex[:10]}"
    ensure_reader_role(pg_dsn, role, "s3cret-reader", table=owner.names.table)
    ensure_reader_role(pg_dsn, role, "s3cret-reader", table=owner.names.table)  # idempotent
    try:
        reader = build_backend(
            "pgvector", make_conninfo(pg_dsn, user=role), table=owner.names.table
        )
        assert _reads(reader) == _reads(owner)
        with pytest.raises(errors.ReadOnlySqlTransaction):
            reader.delete_papers(["11"])
        reader.close()
        assert owner.count() == len(DOCS)
    finally:
        _drop_role(pg_dsn, role)
