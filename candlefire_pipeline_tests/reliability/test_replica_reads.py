"""The app reading a streaming replica (real primary + hot standby): a replica that lags on
purpose (pg_wal_replay_pause) while pgvector is promoted, or while a drop is applied, keeps
answering from the previous state, never from a table it has not replayed; after
pg_wal_replay_resume it moves to the new state. A replica that is down is one clear error."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.machine import AUTO_PROMOTE, Evidence, transition
from candlefire_pipeline.operations.serving.replication import (
    ReplicaBehindError,
    note_applied_drop,
)
from candlefire_pipeline.operations.serving.state import Target, read_state
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.settings.replica import ReplicaSettings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows
from candlefire_pipeline_tests.replicas import caught_up, primary_and_replica, set_replay

SECRET = f"replica-pw-{uuid.uuid4().hex}"
QUERY = "SPG302 restores synapses in ALS mice"
DOCS = {
    "11": "SPG302 restores synapses in ALS mice",
    "12": "TDP-43 aggregates in motor neurons of ALS patients",
    "13": "Riluzole extends survival modestly in ALS",
    "14": "Edaravone slows functional decline",
    "15": "Tofersen lowers SOD1 in cerebrospinal fluid",
    "16": "C9orf72 repeat expansions in familial ALS",
}
PASSING = Evidence("r-replica", gates=(GateResult("every_gate", True, 1.0, 1.0, "passed"),))
CHROMA, PGVECTOR = Target("chroma"), Target("pgvector")


@pytest.fixture(scope="module")
def replica():
    with primary_and_replica() as made:
        yield made


@pytest.fixture
def deployment(replica, monkeypatch, tmp_path):
    """Papers 11-13 in Chroma (serving, never promoted), a reader role already on the replica;
    (settings, embedder, the reader's settings on the replica, the role)."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", replica.primary.dsn)
    embedder = embedder_for(settings, "query")
    chroma = open_backend("chroma", settings)
    chroma.replace_papers(_rows(embedder, ["11", "12", "13"]))
    chroma.close()
    role = f"cf_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:  # on the replica before
        conn.execute(f"CREATE ROLE {role} LOGIN")  # the tables: what it lacks is a table
        conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {role}")
    caught_up(replica)
    read_dsn = make_conninfo(replica.dsn, user=role, password=SECRET)
    reading = replace(settings, replica=ReplicaSettings(read_dsn=read_dsn, wait_seconds=0.2))
    yield settings, embedder, reading, role
    set_replay(replica, paused=False)  # whatever the test did


def _rows(embedder, pmids: list[str]):
    docs = [DOCS[p] for p in pmids]
    chunks = [chunk(p, document=d, year=2020) for p, d in zip(pmids, docs, strict=True)]
    return make_rows(chunks, embedder.embed(docs), model_id=embedder.model_id)


def _pgvector(settings, embedder, pmids: list[str], role: str | None = None) -> None:
    """Write the papers to pgvector on the primary (and let `role` read it)."""
    backend = open_backend("pgvector", settings)
    try:
        backend.replace_papers(_rows(embedder, pmids))
    finally:
        backend.close()
    if role is not None:
        ensure_reader_role(settings.pg_dsn, role, table=settings.pg_table)


def _documents(collection) -> list[str]:
    return collection.query(query_texts=[QUERY], n_results=2, include=["documents"])["documents"][0]


def test_a_promotion_the_replica_has_not_replayed_serves_the_previous_state(replica, deployment):
    settings, embedder, reading, role = deployment
    with (
        open_collection(reading, embedder) as collection,
        ServingReader(reading, embedder) as reader,
    ):
        assert collection.count() == 3 and collection.target == CHROMA
        assert reader.retrieve(QUERY).pmids and reader.backend_name == "chroma"

        set_replay(replica, paused=True)
        _pgvector(settings, embedder, ["11", "12", "13", "14"], role)
        promoted = transition(settings, AUTO_PROMOTE, "replica test", "tester", PASSING,
                              dsn=settings.pg_dsn)  # fmt: skip
        assert promoted.state.target == PGVECTOR and promoted.state.wal_lsn
        assert history(settings.pg_dsn, 1)[0]["wal_lsn"] == promoted.state.wal_lsn

        # the replica has neither the table nor the role yet: the previous state answers
        for _ in range(3):
            assert collection.count() == 3 and collection.target == CHROMA
            assert _documents(collection)[0] == DOCS["11"]
            assert reader.retrieve(QUERY).pmids and reader.backend_name == "chroma"
        with open_collection(reading, embedder) as fresh:  # nothing to keep serving: refused
            with pytest.raises(ReplicaBehindError, match="pgvector/default"):
                fresh.count()

        set_replay(replica, paused=False)
        caught_up(replica)
        assert collection.count() == 4 and collection.target == PGVECTOR
        assert _documents(collection)[0] == DOCS["11"]
        assert reader.retrieve(QUERY).pmids and reader.backend_name == "pgvector"
        with ServingReader(settings, embedder) as on_primary:  # the same answers as the primary's
            assert on_primary.retrieve(QUERY).pmids == reader.retrieve(QUERY).pmids


def test_a_drop_the_replica_has_not_replayed_serves_the_store_as_before_it(replica, deployment):
    settings, embedder, reading, role = deployment
    _pgvector(settings, embedder, ["11", "12", "13", "14"], role)
    transition(settings, AUTO_PROMOTE, "replica test", "tester", PASSING, dsn=settings.pg_dsn)
    caught_up(replica)
    with open_collection(reading, embedder) as collection:
        assert collection.count() == 4 and collection.target == PGVECTOR

        set_replay(replica, paused=True)
        _pgvector(settings, embedder, ["15", "16"])
        lsn = note_applied_drop(settings, settings.pg_dsn)
        assert lsn and read_state(settings.serving_file).applied_lsn == lsn
        for _ in range(3):  # the previous state, consistent: none of the drop's rows
            assert collection.count() == 4 and collection.target == PGVECTOR
            got = collection.get(where={"pmid": {"$in": ["15", "16"]}}, include=["metadatas"])
            assert got["ids"] == []

        set_replay(replica, paused=False)
        caught_up(replica)
        # a standby cannot notify: the collection's copy of answers moves on by its heartbeat,
        # at the latest one staleness bound after the replay (docs/APP.md, "Across a network")
        time.sleep(reading.app_client.staleness_ms / 1000)
        assert collection.count() == 6
        got = collection.get(where={"pmid": {"$in": ["15", "16"]}}, include=["metadatas"])
        assert len(got["ids"]) == 2


def test_a_replica_that_is_down_is_one_clear_error_without_the_password(
    replica, deployment, caplog
):
    settings, embedder, reading, role = deployment
    _pgvector(settings, embedder, ["11", "12"], role)
    transition(settings, AUTO_PROMOTE, "replica test", "tester", PASSING, dsn=settings.pg_dsn)
    replica.stop()
    try:
        with open_collection(reading, embedder) as collection:
            with pytest.raises(BackendUnavailableError) as down:
                collection.count()
        message = str(down.value)
        assert "read replica" in message and "\n" not in message
        assert SECRET not in message and SECRET not in caplog.text
    finally:
        replica.start()
    caught_up(replica)
    with open_collection(reading, embedder) as collection:
        assert collection.count() == 2
