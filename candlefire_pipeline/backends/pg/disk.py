"""A full disk under Postgres, as one clear error: SQLSTATE 53100 (disk_full) becomes a
StoreFullError naming the server's data directory, the file Postgres could not extend and what
to do. The write's transaction is rolled back whole by then. With WAL on the same full disk the
server PANICs instead, and the client sees the connection lost (a crash: recovery on restart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError, StoreFullError
from candlefire_pipeline.redact import redact_dsn


def data_directory(conn: psycopg.Connection) -> str:
    """The server's data directory, or a stand-in when this role may not read it."""
    try:
        return conn.execute("SHOW data_directory").fetchone()[0]
    except psycopg.Error:
        return "the server's data directory"


def store_full_message(dsn: str, where: str, exc: psycopg.errors.DiskFull) -> str:
    detail = str(exc).splitlines()[0] if str(exc) else "no space left on device"
    return (
        f"the disk of Postgres at {redact_dsn(dsn)} is full ({where}): {detail}; nothing of "
        "this write was committed: free space on that disk (or grow it), then run it again"
    )


@contextmanager
def full_disk_as_store_full(dsn: str, conn: Callable[[], psycopg.Connection]) -> Iterator[None]:
    """Raise StoreFullError for a write that failed on a full disk (`conn`: the store's
    connection, asked for its data directory once the transaction is rolled back)."""
    try:
        yield
    except psycopg.errors.DiskFull as exc:
        raise StoreFullError(store_full_message(dsn, _where(conn), exc)) from exc


def _where(conn: Callable[[], psycopg.Connection]) -> str:
    """The data directory; the stand-in when the server went down after the error (with WAL on
    the full disk, writing the abort may PANIC it): the full disk stays the error to report."""
    try:
        return data_directory(conn())
    except (psycopg.Error, BackendUnavailableError):
        return "the server's data directory"
