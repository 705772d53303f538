"""Rows for a Postgres table, queued in a local JSON-lines file until Postgres takes them.

Each entry has a unique key. Writers append entries to the file (under the caller's lock);
`flush` inserts every queued entry, oldest first and at most once (ON CONFLICT on the key), and
removes what was inserted. A Postgres that is down or refuses writes (a read-only role) leaves
the entries queued; an unreadable line is logged and kept, never dropped. The serving switch's
history and the shadow comparisons both go through here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.fsutil import write_atomic

log = logging.getLogger(__name__)

#: Seconds a flush waits for Postgres; a rollback must not hang on a dead server.
CONNECT_TIMEOUT = 5


@dataclass(frozen=True)
class QueuedTable:
    """The table the queued entries go to: its DDL (idempotent), columns and unique key."""

    name: str
    ddl: tuple[str, ...]
    columns: tuple[str, ...]
    key: str
    json_columns: frozenset[str] = field(default_factory=frozenset)

    def insert(self) -> sql.Composed:
        return sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING").format(
            sql.Identifier(self.name),
            sql.SQL(", ").join(map(sql.Identifier, self.columns)),
            sql.SQL(", ").join(sql.Placeholder() * len(self.columns)),
            sql.Identifier(self.key),
        )

    def row(self, entry: dict) -> list:
        return [
            Jsonb(entry.get(c)) if c in self.json_columns else entry.get(c) for c in self.columns
        ]


@dataclass(frozen=True)
class QueueWrite:
    """What became of the queued entries: inserted now, or still queued locally (and why)."""

    inserted: int
    pending: int
    warning: str | None = None


def pending_entries(pending_file: Path) -> list[dict]:
    """Queued entries, oldest first; an unreadable line is kept out and logged, never dropped."""
    if not Path(pending_file).is_file():
        return []
    entries = []
    for number, line in enumerate(Path(pending_file).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            log.error("%s line %d is not JSON; left in the file", pending_file, number)
    return entries


def queue_entry(pending_file: Path, entry: dict) -> None:
    """Append one entry by rewriting the file atomically (the caller holds the lock)."""
    lines = Path(pending_file).read_text() if Path(pending_file).is_file() else ""
    if lines and not lines.endswith("\n"):
        lines += "\n"
    write_atomic(pending_file, lines + json.dumps(entry, sort_keys=True) + "\n")


def append_entries(pending_file: Path, entries: Iterable[dict]) -> None:
    """Append entries in one write (the caller holds the lock). Cheaper than queue_entry for a
    steady stream; a crash mid-write leaves at most one partial line, logged and kept."""
    text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries)
    if not text:
        return
    Path(pending_file).parent.mkdir(parents=True, exist_ok=True)
    with Path(pending_file).open("a", encoding="utf-8") as handle:
        handle.write(text)


def rewrite_entries(pending_file: Path, keep: Callable[[str], bool]) -> int:
    """Keep only the lines `keep` accepts (the caller holds the lock); how many stay."""
    if not Path(pending_file).is_file():
        return 0
    lines = Path(pending_file).read_text().splitlines()
    kept = [line for line in lines if line.strip() and keep(line)]
    if kept:
        write_atomic(pending_file, "\n".join(kept) + "\n")
    else:
        Path(pending_file).unlink(missing_ok=True)
    return len(kept)


def key_of(line: str, key: str) -> str | None:
    try:
        return json.loads(line).get(key)
    except (json.JSONDecodeError, AttributeError):
        return None


def insert_entries(dsn: str, table: QueuedTable, entries: list[dict]) -> None:
    """Create the table if needed and insert the entries in one transaction."""
    with connect(dsn, timeout=CONNECT_TIMEOUT) as conn:
        for statement in table.ddl:
            conn.execute(statement)
        with conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(table.insert(), [table.row(e) for e in entries])


def flush(
    dsn: str | None,
    pending_file: Path,
    lock: Callable[[], AbstractContextManager],
    table: QueuedTable,
    prune: Callable[[], object] | None = None,
) -> QueueWrite:
    """Insert every queued entry, oldest first; entries stay queued when Postgres is down.

    `lock` is a context manager factory guarding the queue file; `prune` runs under it first
    (the owner drops entries that must never be inserted).
    """
    with lock():
        if prune is not None:
            prune()
        entries = pending_entries(pending_file)
    if not entries:
        return QueueWrite(0, 0)
    if dsn is None:
        return QueueWrite(0, len(entries), f"no Postgres to write the {table.name} to")
    try:
        insert_entries(dsn, table, entries)
    except (BackendUnavailableError, psycopg.Error) as exc:
        reason = str(exc) if isinstance(exc, BackendUnavailableError) else type(exc).__name__
        reason = " ".join(reason.split())  # libpq's messages span lines; a warning is one line
        return QueueWrite(0, len(entries), f"Postgres did not take the {table.name}: {reason}")
    done = {e.get(table.key) for e in entries}
    with lock():
        left = rewrite_entries(pending_file, lambda line: key_of(line, table.key) not in done)
    log.info("%s: %d entries written to Postgres", table.name, len(entries))
    return QueueWrite(len(entries), left)
