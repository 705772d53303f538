"""An index generation promoted while the app's read replica lags (real primary + hot standby):
the app keeps reading the generation it served until the replica has replayed the new one's
table, then moves to it; pgvector/default before, dim48 after, never a table it lacks."""

from __future__ import annotations

import uuid
from dataclasses import replace

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.app import open_collection
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    PROMOTE_GENERATION,
    Evidence,
    transition,
)
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.settings.replica import ReplicaSettings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import build, ingest
from candlefire_pipeline_tests.replicas import caught_up, primary_and_replica, set_replay

QUERY = "SPG302 restores synapses in ALS"
GATES = (GateResult("every_gate", True, 1.0, 1.0, "passed"),)
DEFAULT, DIM48 = Target("pgvector"), Target("pgvector", "dim48")


@pytest.fixture
def deployment(monkeypatch, tmp_path):
    """The demo drops in pgvector and Chroma on a primary of its own, pgvector/default
    promoted, a reader role on the replica; (settings, the reader's settings, replica)."""
    with primary_and_replica() as replica:
        monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")
        settings = pipeline_env(monkeypatch, tmp_path / "data", replica.primary.dsn)
        for drop in write_demo_drops(settings.drops_dir):
            ingest(settings, drop.name, [])
        transition(settings, AUTO_PROMOTE, "default", "tester", Evidence("r1", gates=GATES),
                   dsn=settings.pg_dsn)  # fmt: skip
        role = f"cf_reader_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role)
            conn.execute(
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {role}"
            )
        caught_up(replica)
        read_dsn = make_conninfo(replica.dsn, user=role)
        reading = replace(settings, replica=ReplicaSettings(read_dsn=read_dsn, wait_seconds=0.2))
        try:
            yield settings, reading, replica
        finally:
            set_replay(replica, paused=False)


def test_a_generation_promoted_while_the_replica_lags_is_read_once_replayed(deployment):
    settings, reading, replica = deployment
    embedder = embedder_for(settings, "query")
    with open_collection(reading) as collection, ServingReader(reading, embedder) as reader:
        default_count = collection.count()
        assert collection.target == DEFAULT and reader.retrieve(QUERY).pmids

        set_replay(replica, paused=True)
        dim48 = create_generation(settings, "dim48", "hashing-v1:48")
        build(settings, dim48)  # its table exists on the primary only
        evidence = Evidence("c1", gates=GATES, wanted=DIM48, compared=(DEFAULT, DIM48))
        promoted = transition(settings, PROMOTE_GENERATION, "serve dim48", "tester", evidence,
                              dsn=settings.pg_dsn)  # fmt: skip
        assert promoted.decision.outcome == "changed" and promoted.state.target == DIM48
        for _ in range(3):  # the generation it served, never the table the replica lacks
            assert collection.count() == default_count and collection.target == DEFAULT
            assert reader.retrieve(QUERY).pmids and reader.generation == "default"

        set_replay(replica, paused=False)
        caught_up(replica)
        assert collection.count() > 0 and collection.target == DIM48
        answer = reader.retriever()
        assert reader.generation == "dim48" and answer.embedder.dim == 48
        assert answer.retrieve(QUERY).pmids
