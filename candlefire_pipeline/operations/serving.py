"""The serving-backend switch: a JSON file the app reads plus a history table in Postgres."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from candlefire_pipeline.fsutil import write_atomic

log = logging.getLogger(__name__)

BACKENDS = ("chroma", "pgvector")
DEFAULT_BACKEND = "chroma"  # what candle-fire serves from today

_HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS serving_backend_history (
    id          bigserial PRIMARY KEY,
    backend     text NOT NULL CHECK (backend IN ('chroma', 'pgvector')),
    report_id   text,
    reason      text NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True)
class ServingState:
    backend: str
    changed_at: str | None = None  # UTC ISO time of the last change
    report_id: str | None = None
    reason: str = "initial: candle-fire serves from Chroma"


def read_state(path: Path) -> ServingState:
    """The current switch; Chroma when nothing was ever recorded."""
    if not path.exists():
        return ServingState(backend=DEFAULT_BACKEND)
    data = json.loads(path.read_text())
    if data.get("backend") not in BACKENDS:
        raise ValueError(f"{path}: unknown serving backend {data.get('backend')!r}")
    return ServingState(**{k: data.get(k) for k in ServingState.__dataclass_fields__})


def record_state(
    path: Path, dsn: str | None, backend: str, report_id: str | None, reason: str
) -> ServingState:
    """Write the switch file atomically and append the change to the Postgres history table."""
    if backend not in BACKENDS:
        raise ValueError(f"serving backend must be one of {BACKENDS}, got {backend!r}")
    state = ServingState(
        backend=backend,
        changed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        report_id=report_id,
        reason=reason,
    )
    if dsn is not None:
        _append_history(dsn, state)
    write_atomic(path, json.dumps(asdict(state), indent=2) + "\n")
    log.info("serving backend is now %s (%s)", backend, reason)
    return state


def _append_history(dsn: str, state: ServingState) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(_HISTORY_DDL)
        conn.execute(
            "INSERT INTO serving_backend_history (backend, report_id, reason) VALUES (%s, %s, %s)",
            (state.backend, state.report_id, state.reason),
        )


def history(dsn: str, limit: int = 20) -> list[dict]:
    """The latest changes of the switch, newest first."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a reader role may not CREATE: a missing table simply means no history yet
        if not conn.execute("SELECT to_regclass('serving_backend_history')").fetchone()[0]:
            return []
        cur = conn.execute(
            "SELECT backend, report_id, reason, changed_at FROM serving_backend_history"
            " ORDER BY id DESC LIMIT %s",
            (limit,),
        )
        names = [c.name for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
