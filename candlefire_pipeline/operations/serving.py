"""The serving switch as a state machine: the transition table with its guards, and the one
function that changes the switch (file first, atomically, under a lock; then history). The states
and the evidence the guards read live in operations/serving_state.py.

The app reads `serving_backend.json` ("backend" is what to serve). Every caller -- the
serving_backend asset, `candlefire rollback/promote`, the app-facing reader -- goes through here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from candlefire_pipeline.fsutil import file_lock, write_atomic
from candlefire_pipeline.operations.serving_guards import (
    ALL_CLEAR,
    GATES_PASS,
    GUARDS,
    NEWER_THAN_PIN,
    ROLLBACK_DUE,
    SOURCE_CLEAR,
    WINDOW_COUNTED,
    counted,
)
from candlefire_pipeline.operations.serving_history import HistoryWrite, flush, queue_entry
from candlefire_pipeline.operations.serving_state import (
    DEGRADED,
    INITIAL,
    MAX_COUNTED_WINDOWS,
    PINNED,
    PROMOTED,
    Evidence,
    ServingState,
    read_state,
)
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

# events -------------------------------------------------------------------------
AUTO_PROMOTE = "auto_promote"  # the serving_backend asset (schedule, sensor, re-run)
PROMOTE = "promote"  # `candlefire promote --reason`
ROLLBACK = "rollback"  # `candlefire rollback --reason`
#: a fresh window of evidence while serving (parity_report, shadow_parity) failed / passed
WINDOW_FAILED = "window_failed"
WINDOW_PASSED = "window_passed"
WINDOW_EVENTS = (WINDOW_FAILED, WINDOW_PASSED)
EVENTS = (AUTO_PROMOTE, PROMOTE, ROLLBACK, *WINDOW_EVENTS)
CHANGED, UNCHANGED, REFUSED = "changed", "unchanged", "refused"
NOT_WATCHED = "not serving pgvector: a window changes nothing"
NO_EVIDENCE = Evidence()


@dataclass(frozen=True)
class Rule:
    """target None: the event changes nothing; `refused` says whether that is a refusal (an
    operator gets a non-zero exit) or simply nothing to do. `why` may name {source} and {count}
    (the window's source and its failing windows in a row, this one included)."""

    target: str | None
    guards: tuple[str, ...] = ()
    refused: bool = False
    why: str = ""


#: (state, event) -> rule, or rules tried in order (the first whose guards all pass applies;
#: when none does, the event is refused with every guard's reason). Every pair is listed;
#: tests walk this table.
TRANSITIONS: dict[tuple[str, str], Rule | tuple[Rule, ...]] = {
    (INITIAL, AUTO_PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, ROLLBACK): Rule(PINNED),
    (INITIAL, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (INITIAL, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
    (PROMOTED, AUTO_PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, ROLLBACK): Rule(PINNED),
    (PROMOTED, WINDOW_FAILED): (
        Rule(PINNED, (ROLLBACK_DUE,), why="auto-rollback after {count} failing {source} windows"),
        Rule(DEGRADED, why="degraded: a {source} window failed"),
    ),
    (PROMOTED, WINDOW_PASSED): Rule(None, why="healthy: nothing to clear"),
    (DEGRADED, AUTO_PROMOTE): Rule(None, why="already serving pgvector (degraded)"),
    # an operator who has looked re-arms the watch, on a report passing every gate
    (DEGRADED, PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (DEGRADED, ROLLBACK): Rule(PINNED),
    (DEGRADED, WINDOW_FAILED): (
        Rule(None, (WINDOW_COUNTED,), why="this window was already counted"),
        Rule(PINNED, (ROLLBACK_DUE,), why="auto-rollback after {count} failing {source} windows"),
        Rule(DEGRADED, why="still degraded: {count} failing {source} windows in a row"),
    ),
    (DEGRADED, WINDOW_PASSED): (
        Rule(None, (SOURCE_CLEAR,), why="no failing {source} window to clear"),
        Rule(PROMOTED, (ALL_CLEAR,), why="recovered: a {source} window passed"),
        Rule(DEGRADED, why="still degraded: {source} recovered, another source still fails"),
    ),
    (PINNED, AUTO_PROMOTE): Rule(
        None,
        refused=True,
        why="pinned to Chroma (by an operator or the auto-rollback): only `candlefire promote`"
        " leaves a pin",
    ),  # fmt: skip
    (PINNED, PROMOTE): Rule(PROMOTED, (GATES_PASS, NEWER_THAN_PIN)),
    (PINNED, ROLLBACK): Rule(PINNED),  # a new pin replaces the old one (new reason, new time)
    (PINNED, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (PINNED, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
}


@dataclass(frozen=True)
class Decision:
    event: str
    source: str
    target: str  # equals source unless outcome is CHANGED
    outcome: str  # CHANGED | UNCHANGED | REFUSED
    message: str


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    state: ServingState
    history: HistoryWrite = field(default_factory=lambda: HistoryWrite(0, 0))


def _rules(entry: Rule | tuple[Rule, ...]) -> tuple[Rule, ...]:
    return entry if isinstance(entry, tuple) else (entry,)


def _message(rule: Rule, state: ServingState, evidence: Evidence) -> str:
    if not rule.why:
        return f"{state.state} -> {rule.target}"
    window = evidence.window
    if window is None:
        return rule.why
    count = len(counted(state, window)) + (window.window_id not in counted(state, window))
    return rule.why.format(source=window.source, count=count)


def decide(state: ServingState, event: str, evidence: Evidence = NO_EVIDENCE) -> Decision:
    """The transition table applied to one event: pure, no I/O."""
    if event not in EVENTS:
        raise ValueError(f"unknown serving event {event!r}; expected one of {EVENTS}")
    if event in WINDOW_EVENTS and evidence.window is None:
        raise ValueError(f"{event} needs the window it judges (Evidence.window)")
    problems: list[str] = []
    for rule in _rules(TRANSITIONS[(state.state, event)]):
        found = [p for g in rule.guards if (p := GUARDS[g](state, evidence))]
        if found:
            problems += found
            continue
        message = _message(rule, state, evidence)
        if rule.target is None:
            return Decision(event, state.state, state.state,
                            REFUSED if rule.refused else UNCHANGED, message)  # fmt: skip
        return Decision(event, state.state, rule.target, CHANGED, message)
    return Decision(event, state.state, state.state, REFUSED, "; ".join(dict.fromkeys(problems)))


def failing_after(state: ServingState, decision: Decision, evidence: Evidence) -> dict:
    """The consecutive failing windows per source once `decision` applies (DEGRADED only)."""
    if decision.target != DEGRADED or evidence.window is None:
        return {}
    window, failing = evidence.window, dict(state.failing)
    if decision.event == WINDOW_PASSED:
        failing.pop(window.source, None)
    else:
        failing[window.source] = [*failing.get(window.source, []), window.window_id]
        failing[window.source] = failing[window.source][-MAX_COUNTED_WINDOWS:]
    return failing


# the switch file -----------------------------------------------------------------------------
@contextmanager
def switch_lock(settings: Settings) -> Iterator[None]:
    """One writer of the switch (and its history queue) at a time, across processes."""
    with file_lock(settings.serving_file.with_name(settings.serving_file.name + ".lock")):
        yield


def _current(settings: Settings, event: str) -> ServingState:
    try:
        return read_state(settings.serving_file)
    except ValueError:
        if event != ROLLBACK:
            raise
        # every state rolls back to the pin, so an unreadable switch must not stop a rollback
        log.warning("the serving switch is unreadable; rolling back over it")
        return ServingState(state=PROMOTED)


def transition(
    settings: Settings,
    event: str,
    reason: str,
    actor: str,
    evidence: Evidence = NO_EVIDENCE,
    dsn: str | None = None,
) -> Outcome:
    """Decide under the switch lock; on a change write the file (atomically) and queue the
    history entry, then insert the queued history into Postgres at `dsn` if it answers."""
    if not reason or not reason.strip():
        raise ValueError(f"{event} needs a reason (--reason)")
    with switch_lock(settings):
        current = _current(settings, event)
        decision = decide(current, event, evidence)
        if decision.outcome == CHANGED:
            current = _next_state(current, decision, evidence, reason.strip(), actor)
            write_atomic(settings.serving_file, current.to_json())
            queue_entry(settings.serving_pending_file, _entry(current))
            log.info("serving switch: %s (%s)", current.describe(), decision.message)
    history = flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
    return Outcome(decision, current, history)


def _next_state(
    current: ServingState, decision: Decision, evidence: Evidence, reason: str, actor: str
) -> ServingState:
    """The state a CHANGED decision writes: a rollback or a window keeps the report served on;
    a window's reason starts with what it did (degraded, recovered, auto-rollback)."""
    event = decision.event
    keeps_report = event == ROLLBACK or event in WINDOW_EVENTS
    report_id = current.report_id if keeps_report else evidence.report_id
    if event in WINDOW_EVENTS:
        reason = f"{decision.message}: {reason}"
    return ServingState(
        decision.target, datetime.now(UTC).isoformat(), report_id, reason, actor, event,
        failing_after(current, decision, evidence),
    )  # fmt: skip


def _entry(state: ServingState) -> dict:
    return {"entry_id": uuid.uuid4().hex, "backend": state.backend, **asdict(state)}


def sync_history(settings: Settings, dsn: str | None) -> HistoryWrite:
    """Insert whatever history is still queued (any successful connection should call this)."""
    return flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
