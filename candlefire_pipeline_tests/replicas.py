"""A primary embedded Postgres of the test's own with a streaming replica (hot standby) of it,
and the replica's controls the tests use: pause and resume its replay, wait for it to catch up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from candlefire_pipeline.backends.pg.replica import EmbeddedReplica
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.wal import current_lsn, replay_position
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.reliability.helpers import wait_for


@contextmanager
def primary_and_replica() -> Iterator[EmbeddedReplica]:
    """A new primary and its replica (replica.primary), both stopped afterwards: tests pause the
    replay and stop servers, which the session's server must never see."""
    with pg_data_root() as root:
        primary = EmbeddedPostgres(root / "primary")
        replica = EmbeddedReplica(primary, root / "replica")
        try:
            replica.create()
            yield replica
        finally:
            replica.stop()
            primary.stop()


def set_replay(replica: EmbeddedReplica, paused: bool) -> None:
    """pg_wal_replay_pause() / _resume() on the standby: it receives WAL but applies none."""
    replica.pause_replay(paused)


def caught_up(replica: EmbeddedReplica, dsn: str | None = None) -> str:
    """Wait until the replica has replayed the primary's current position; that position."""
    with psycopg.connect(dsn or replica.primary.dsn, autocommit=True) as conn:
        lsn = current_lsn(conn)

    def replayed() -> bool:
        with psycopg.connect(replica.dsn, autocommit=True) as conn:
            return replay_position(conn).has_replayed(lsn)

    wait_for(replayed, f"the replica replaying {lsn}", replica.is_running)
    return lsn
