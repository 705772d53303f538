"""WAL positions (LSNs) of a primary and of a streaming replica, as the serving switch records
and compares them (operations/serving/replication.py)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import psycopg

log = logging.getLogger(__name__)

_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def lsn_value(text: str) -> int:
    """'16/B374D848' -> its byte position (what Postgres compares); ValueError otherwise."""
    found = _LSN.match(text or "")
    if found is None:
        raise ValueError(f"not a WAL position (LSN): {text!r}")
    return (int(found[1], 16) << 32) + int(found[2], 16)


def is_lsn(text) -> bool:
    return isinstance(text, str) and _LSN.match(text) is not None


def current_lsn(conn: psycopg.Connection) -> str:
    """The primary's current WAL write position (raises on a standby: it writes none)."""
    return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]


def primary_lsn(dsn: str | None, timeout: int = 5) -> str | None:
    """The current WAL position of the primary at `dsn`; None when there is no DSN, it does not
    answer or it is a standby (never raises: a rollback must not wait on it)."""
    if dsn is None:
        return None
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn:
            return current_lsn(conn)
    except psycopg.Error as exc:
        log.warning("no WAL position recorded (Postgres did not answer: %s): a reader on a "
                    "replica follows this at once", type(exc).__name__)  # fmt: skip
        return None


@dataclass(frozen=True)
class Replay:
    """Where a server stands as a read source: a standby and the WAL it has replayed."""

    in_recovery: bool
    #: None on a primary (nothing to replay) or a standby that has replayed nothing yet
    replayed: str | None
    #: seconds since the last replayed transaction committed on the primary (None: unknown)
    behind_seconds: float | None

    def has_replayed(self, lsn: str) -> bool:
        """Whether everything up to `lsn` is visible here (a primary has all it wrote)."""
        if not self.in_recovery:
            return True
        return self.replayed is not None and lsn_value(self.replayed) >= lsn_value(lsn)


def replay_position(conn: psycopg.Connection) -> Replay:
    """The server's replay state in one round trip (works with a read-only role)."""
    row = conn.execute(
        "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
        "extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"
    ).fetchone()
    return Replay(*row)
