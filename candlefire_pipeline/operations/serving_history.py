"""The switch's history: a Postgres table, with a local queue for changes made while it is down.

Every change of the switch becomes one entry (with a unique entry_id). It is inserted when
Postgres answers; otherwise it is appended to a JSON-lines file under the data dir and inserted,
in order and at most once (ON CONFLICT on entry_id), on the next successful connection.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.stores import SERVABLE_STORES

log = logging.getLogger(__name__)

#: Seconds a history write waits for Postgres; a rollback must not hang on a dead server.
HISTORY_CONNECT_TIMEOUT = 5
ENTRY_FIELDS = ("entry_id", "backend", "state", "event", "report_id", "reason", "actor",
                "changed_at", "generation", "previous")  # fmt: skip

_SERVABLE = ", ".join(f"'{name}'" for name in SERVABLE_STORES)
_DDL = (
    f"""CREATE TABLE IF NOT EXISTS serving_backend_history (
        id          bigserial PRIMARY KEY,
        backend     text NOT NULL CHECK (backend IN ({_SERVABLE})),
        report_id   text,
        reason      text NOT NULL,
        changed_at  timestamptz NOT NULL DEFAULT now()
    )""",
    # columns added by the state machine; an older table gains them in place
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS state text",
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS event text",
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS actor text",
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS entry_id text",
    # added by index generations: NULL in older rows means the default generation
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS generation text",
    "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS previous text",
    "CREATE UNIQUE INDEX IF NOT EXISTS serving_backend_history_entry"
    " ON serving_backend_history (entry_id)",
)
_INSERT = (
    "INSERT INTO serving_backend_history"
    f" ({', '.join(ENTRY_FIELDS)}) VALUES ({', '.join(['%s'] * len(ENTRY_FIELDS))})"
    " ON CONFLICT (entry_id) DO NOTHING"
)


@dataclass(frozen=True)
class HistoryWrite:
    """What became of the history entries: inserted now, or still queued locally (and why)."""

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
    """Append one entry to the queue (the caller holds the switch lock)."""
    lines = Path(pending_file).read_text() if Path(pending_file).is_file() else ""
    if lines and not lines.endswith("\n"):
        lines += "\n"
    write_atomic(pending_file, lines + json.dumps(entry, sort_keys=True) + "\n")


def _drop_entries(pending_file: Path, done: set[str]) -> int:
    """Remove inserted entries from the queue; what stays queued."""
    if not Path(pending_file).is_file():
        return 0
    kept = [
        line
        for line in Path(pending_file).read_text().splitlines()
        if line.strip() and _entry_id(line) not in done
    ]
    if kept:
        write_atomic(pending_file, "\n".join(kept) + "\n")
    else:
        Path(pending_file).unlink(missing_ok=True)
    return len(kept)


def _entry_id(line: str) -> str | None:
    try:
        return json.loads(line).get("entry_id")
    except (json.JSONDecodeError, AttributeError):
        return None


def flush(dsn: str | None, pending_file: Path, lock) -> HistoryWrite:
    """Insert every queued entry, oldest first; entries stay queued when Postgres is down.

    `lock` is a context manager factory guarding the queue file (the switch lock).
    """
    with lock():
        entries = pending_entries(pending_file)
    if not entries:
        return HistoryWrite(0, 0)
    if dsn is None:
        return HistoryWrite(0, len(entries), "no Postgres to write the history to")
    try:
        with connect(dsn, timeout=HISTORY_CONNECT_TIMEOUT) as conn:
            for statement in _DDL:
                conn.execute(statement)
            with conn.transaction():
                for entry in entries:
                    conn.execute(_INSERT, [entry.get(k) for k in ENTRY_FIELDS])
    except (BackendUnavailableError, psycopg.Error) as exc:
        reason = str(exc) if isinstance(exc, BackendUnavailableError) else type(exc).__name__
        reason = " ".join(reason.split())  # libpq's messages span lines; a warning is one line
        return HistoryWrite(0, len(entries), f"Postgres did not take the history: {reason}")
    with lock():
        left = _drop_entries(pending_file, {e["entry_id"] for e in entries})
    log.info("serving history: %d entries written to Postgres", len(entries))
    return HistoryWrite(len(entries), left)


def history(dsn: str, limit: int = 20) -> list[dict]:
    """The latest changes of the switch, newest first (by when they happened)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a reader role may not CREATE: a missing table simply means no history yet
        if not conn.execute("SELECT to_regclass('serving_backend_history')").fetchone()[0]:
            return []
        cur = conn.execute(
            "SELECT * FROM serving_backend_history ORDER BY changed_at DESC, id DESC LIMIT %s",
            (limit,),
        )
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    # a row from before generations (or a table without the column) served the default one
    return [{**row, "generation": row.get("generation") or DEFAULT_NAME} for row in rows]
