"""The soak a retirement waits for, read from the serving switch's history (newest first, as
operations/serving/history.history returns it): since when pgvector has served the default
generation without a break, and which watched windows failed in the last N days."""

from __future__ import annotations

from datetime import datetime, timedelta

from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.serving.proofs import FailedWindow, Soak
from candlefire_pipeline.operations.serving.state import DEGRADED, PROMOTED, ServingState
from candlefire_pipeline.operations.serving.table import WINDOW_FAILED
from candlefire_pipeline.stores import CANDIDATE

#: States in which pgvector serves, unpinned (degraded still serves: its windows are judged).
SERVING_STATES = (PROMOTED, DEGRADED)


def _iso(value) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _serves_default(row: dict) -> bool:
    return (row["backend"], row["generation"]) == (CANDIDATE, DEFAULT_NAME) and row[
        "state"
    ] in SERVING_STATES


def serving_since(rows: list[dict], state: ServingState) -> str | None:
    """The first change of the unbroken run of changes, newest back, that each left pgvector
    serving the default generation unpinned; the switch's own last change when the history has
    none (a conservative start); None when that is not what serves now."""
    serves_now = (state.backend, state.generation) == (CANDIDATE, DEFAULT_NAME)
    if not serves_now or state.state not in SERVING_STATES:
        return None
    since = None
    for row in rows:
        if not _serves_default(row):
            break
        since = _iso(row["changed_at"])
    return since or state.changed_at


def failed_windows(rows: list[dict], began: datetime) -> tuple[FailedWindow, ...]:
    """Every window the switch counted as failing since `began` (a failing window always
    changes the switch, so each is in the history: degraded, still degraded, auto-rollback)."""
    return tuple(
        FailedWindow(_iso(row["changed_at"]), row["reason"])
        for row in rows
        if row["event"] == WINDOW_FAILED
        and datetime.fromisoformat(_iso(row["changed_at"])) >= began
    )


def soak_evidence(rows: list[dict], state: ServingState, days: float, now: datetime) -> Soak:
    """The soak of `days` ending `now`, judged on the history `rows` and the switch `state`."""
    began = now - timedelta(days=days)
    return Soak(days, now.isoformat(), serving_since(rows, state), failed_windows(rows, began))
