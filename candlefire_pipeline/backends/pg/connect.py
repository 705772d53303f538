"""Connections to the pgvector store: autocommit, extensions present, vector types registered."""

from __future__ import annotations

import logging

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.version import read_versions, warn_below_floor
from candlefire_pipeline.redact import redact_dsn

log = logging.getLogger(__name__)

EXTENSIONS = ("vector", "pg_trgm")

#: How often a backend busy on a long statement checks that its client is still there. Postgres
#: does not by default: a worker SIGKILLed mid CREATE INDEX or HNSW build leaves its backend
#: building, holding its locks (the phrase index's advisory lock, the table's), so the next run
#: found the build "taken by another session" and the invalid index stayed. With it, the orphan
#: ends within this interval and the next run finds the locks free.
CLIENT_CHECK_MS = 1000


def one_line(message: str) -> str:
    """A server's or libpq's message on one line (libpq lists each host tried on its own)."""
    return " ".join(message.split())


def connect(
    dsn: str, timeout: int = 15, connection_class: type[psycopg.Connection] = psycopg.Connection
) -> psycopg.Connection:
    """An autocommit connection (`timeout` unless the DSN sets connect_timeout); failures name
    the server, never the password."""
    try:
        given = conninfo_to_dict(dsn)
        password = given.get("password") or ""
    except psycopg.Error:
        # psycopg's parse error quotes the DSN: raise outside the handler so no chained
        # exception (__context__) keeps it either.
        password = None
    if password is None:
        raise BackendUnavailableError("the Postgres DSN cannot be parsed (value not shown)")
    timeouts = {} if "connect_timeout" in given else {"connect_timeout": timeout}
    try:
        conn = connection_class.connect(dsn, autocommit=True, **timeouts)
    except psycopg.Error as exc:
        reason = str(exc).replace(password, "***") if password else str(exc)
        raise BackendUnavailableError(
            f"cannot connect to Postgres at {redact_dsn(dsn)}: {one_line(reason)}"
        ) from None
    _check_for_a_gone_client(conn)
    return conn


def _check_for_a_gone_client(conn: psycopg.Connection) -> None:
    """End this session's statements when its client dies (Postgres 14+, where supported)."""
    try:
        conn.execute(f"SET client_connection_check_interval = {CLIENT_CHECK_MS}")
    # Postgres 13 or older (no such setting), or a platform without the check (not Linux)
    except (psycopg.errors.UndefinedObject, psycopg.errors.InvalidParameterValue):
        log.info("this Postgres cannot end a dead client's statements; a killed run's build "
                 "holds its locks until it ends")  # fmt: skip


def _ensure_extensions(conn: psycopg.Connection) -> None:
    """Create vector + pg_trgm only when missing: a read-only role or standby cannot CREATE."""
    present = conn.execute(
        "SELECT count(*) FROM pg_extension WHERE extname = ANY(%s)", [list(EXTENSIONS)]
    ).fetchone()[0]
    if present == len(EXTENSIONS):
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('candlefire:extensions'))")
        for ext in EXTENSIONS:
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext)))


def open_connection(
    dsn: str, connection_class: type[psycopg.Connection] = psycopg.Connection
) -> psycopg.Connection:
    """connect(), then make sure pgvector + pg_trgm exist and register the vector types."""
    conn = connect(dsn, connection_class=connection_class)
    try:
        _ensure_extensions(conn)
        register_vector(conn)
        warn_below_floor(read_versions(conn), redact_dsn(dsn))
    except psycopg.Error as exc:
        conn.close()
        raise BackendUnavailableError(
            f"Postgres at {redact_dsn(dsn)} cannot provide pgvector + pg_trgm: {exc}"
        ) from None
    conn.add_notice_handler(_log_pgvector_notice)
    return conn


def _log_pgvector_notice(notice: psycopg.errors.Diagnostic) -> None:
    """pgvector's build notices (e.g. the HNSW graph spilling out of memory) reach the log."""
    message = notice.message_primary or ""
    if message.startswith(("hnsw ", "ivfflat ")):
        log.warning("pgvector: %s", message)
