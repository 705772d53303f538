"""The switch's history: a Postgres table, with a local queue for changes made while it is down.

Every change of the switch becomes one entry (with a unique entry_id). It is inserted when
Postgres answers; otherwise it waits in a JSON-lines file under the data dir and is inserted,
in order and at most once, on the next successful connection (operations/pending_rows.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import psycopg

from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.pending_rows import (
    QueuedTable,
    QueueWrite,
    key_of,
    pending_entries,
    queue_entry,
    rewrite_entries,
)
from candlefire_pipeline.operations.pending_rows import flush as flush_queue
from candlefire_pipeline.operations.serving.state import read_state
from candlefire_pipeline.stores import SERVABLE_STORES

log = logging.getLogger(__name__)

__all__ = ["HistoryWrite", "flush", "history", "pending_entries", "queue_entry"]

#: The event of a row a restore adds: the switch as it stands re-recorded, not a change.
RESTORED = "restored"

#: What became of the history entries (the queue's outcome, under the name the switch uses).
HistoryWrite = QueueWrite

_SERVABLE = ", ".join(f"'{name}'" for name in SERVABLE_STORES)
HISTORY_TABLE = QueuedTable(
    name="serving_backend_history",
    ddl=(
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
        # added by retirement: the retired stores, comma-joined (NULL: none)
        "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS retired text",
        # added by the read replica: the primary's WAL position at the change (NULL: unknown)
        "ALTER TABLE serving_backend_history ADD COLUMN IF NOT EXISTS wal_lsn text",
        "CREATE UNIQUE INDEX IF NOT EXISTS serving_backend_history_entry"
        " ON serving_backend_history (entry_id)",
    ),
    columns=(
        "entry_id",
        "backend",
        "state",
        "event",
        "report_id",
        "reason",
        "actor",
        "changed_at",
        "generation",
        "previous",
        "retired",
        "wal_lsn",
    ),  # fmt: skip
    key="entry_id",
)


def flush(
    dsn: str | None,
    pending_file: Path,
    lock: Callable[[], AbstractContextManager],
    switch_file: Path,
) -> HistoryWrite:
    """Insert every queued history entry of the switch at `switch_file`, oldest first (`lock`:
    the switch lock's factory), once a change it never made is dropped (drop_unwritten)."""
    prune = lambda: drop_unwritten(pending_file, switch_file)  # noqa: E731 - under the lock
    return flush_queue(dsn, pending_file, lock, HISTORY_TABLE, prune)


def drop_unwritten(pending_file: Path, switch_file: Path) -> int:
    """Drop the last queued change when it is not the switch's (its `changed_at`): a change is
    queued before the switch is written, so a process killed between the two leaves one entry
    for a change that never happened (the caller holds the switch lock). A restore's row
    records the switch as it stands, not a change: never dropped. How many went."""
    changes = [e for e in pending_entries(pending_file) if e.get("event") != RESTORED]
    if not changes:
        return 0
    try:
        changed_at = read_state(switch_file).changed_at
    except ValueError:  # an unreadable switch: keep every entry, the operator repairs it
        return 0
    if changes[-1].get("changed_at") == changed_at:
        return 0
    unwritten = changes[-1].get(HISTORY_TABLE.key)
    rewrite_entries(pending_file, lambda line: key_of(line, HISTORY_TABLE.key) != unwritten)
    log.warning("serving history: the queued change %r was dropped: its switch write never "
                "happened (the process was killed between the two)",
                changes[-1].get("reason"))  # fmt: skip
    return 1


def history(dsn: str, limit: int | None = 20) -> list[dict]:
    """The latest changes of the switch, newest first (by when they happened); None: all."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a reader role may not CREATE: a missing table simply means no history yet
        if not conn.execute("SELECT to_regclass('serving_backend_history')").fetchone()[0]:
            return []
        cur = conn.execute(
            "SELECT * FROM serving_backend_history ORDER BY changed_at DESC, id DESC LIMIT %s",
            (limit,),  # LIMIT NULL is no limit
        )
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    # a row from before generations (or a table without the column) served the default one
    return [{**row, "generation": row.get("generation") or DEFAULT_NAME} for row in rows]
