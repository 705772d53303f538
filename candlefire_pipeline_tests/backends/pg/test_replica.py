"""The embedded streaming replica: made from the primary with pg_basebackup -R, streaming behind
a slot, read-only, its lag and pause visible, caught up after a stop, removed with its slot."""

from __future__ import annotations

import psycopg
import pytest

from candlefire_pipeline.backends.pg.replica import EmbeddedReplica, ReplicaError
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.wal import current_lsn, replay_position
from candlefire_pipeline_tests.replicas import caught_up, primary_and_replica, set_replay

pytestmark = pytest.mark.server  # starts two Postgres servers of its own


@pytest.fixture(scope="module")
def replica():
    with primary_and_replica() as made:
        yield made


def _write(dsn: str, statement: str) -> str:
    """Run a statement on the primary; its WAL position afterwards."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)
        return current_lsn(conn)


def _count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_the_replica_streams_refuses_writes_and_shows_a_paused_replay(replica):
    primary = replica.primary.dsn
    _write(primary, "CREATE TABLE streamed (x int)")
    _write(primary, "INSERT INTO streamed SELECT generate_series(1, 100)")
    caught_up(replica)
    assert _count(replica.dsn, "streamed") == 100
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        _write(replica.dsn, "INSERT INTO streamed VALUES (0)")

    set_replay(replica, paused=True)
    try:
        lsn = _write(primary, "INSERT INTO streamed SELECT generate_series(1, 1000)")
        status = replica.status()
        assert status.running and status.slot_active and status.replay_paused
        assert status.lag_bytes > 0 and "replay PAUSED" in status.describe()
        with psycopg.connect(replica.dsn, autocommit=True) as conn:
            assert not replay_position(conn).has_replayed(lsn)
        assert _count(replica.dsn, "streamed") == 100  # what it had replayed: the old rows
    finally:
        set_replay(replica, paused=False)
    caught_up(replica)
    assert _count(replica.dsn, "streamed") == 1100
    assert replica.status().lag_bytes == 0


def test_a_stopped_replica_keeps_its_wal_on_the_primary_and_catches_up(replica):
    primary = replica.primary.dsn
    _write(primary, "CREATE TABLE while_down (x int)")
    caught_up(replica)
    replica.stop()
    assert replica.status().describe() == "replica: stopped"
    _write(primary, "INSERT INTO while_down SELECT generate_series(1, 5000)")
    _write(primary, "SELECT pg_switch_wal()")  # the WAL segment is done: only the slot keeps it
    _write(primary, "CHECKPOINT")
    assert replica.status().lag_bytes > 0  # the slot holds what the replica has not replayed
    replica.start()
    caught_up(replica)
    assert _count(replica.dsn, "while_down") == 5000


def test_making_a_second_replica_over_the_first_is_refused(replica):
    with pytest.raises(ReplicaError, match="already holds a replica"):
        replica.create()
    assert replica.is_running()


def test_remove_drops_the_slot_and_the_directory():
    with primary_and_replica() as replica:
        replica.remove()
        assert not replica.data_dir.exists()
        with psycopg.connect(replica.primary.dsn, autocommit=True) as conn:
            slots = conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0]
        assert slots == 0


def test_a_path_too_long_for_the_socket_is_refused_before_the_backup(tmp_path):
    primary = EmbeddedPostgres(tmp_path / "primary")  # never started: refused first
    replica = EmbeddedReplica(primary, tmp_path / ("r" * 120))
    with pytest.raises(ReplicaError, match="too long a path"):
        replica.create()
    assert primary.pid is None and not replica.data_dir.exists()
