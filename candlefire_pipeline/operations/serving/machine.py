"""The serving switch as a state machine: the one function that changes the switch (file first,
atomically, under a lock; then history) and the pure decision it applies. The transition table
is operations/serving/table.py, its guards operations/serving/guards.py, the states and the
evidence the guards read operations/serving/state.py.

The app reads `serving_backend.json` ("backend" and "generation" are what to serve). Every
caller -- the serving_backend asset, `candlefire rollback/promote`, the watch, the app-facing
reader -- goes through here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime

from candlefire_pipeline.backends.pg.wal import primary_lsn
from candlefire_pipeline.fsutil import file_lock, write_atomic
from candlefire_pipeline.generations.registry import GenerationError, stored_registry
from candlefire_pipeline.generations.served import note_served
from candlefire_pipeline.operations.serving.guards import GUARDS, counted
from candlefire_pipeline.operations.serving.history import (
    HistoryWrite,
    drop_unwritten,
    flush,
    queue_entry,
)
from candlefire_pipeline.operations.serving.published import publish_switch
from candlefire_pipeline.operations.serving.state import (
    BACKEND_OF,
    DEGRADED,
    FLOOR,
    INITIAL,
    MAX_COUNTED_WINDOWS,
    PINNED,
    PINNED_PGVECTOR,
    PINNED_STATES,
    PROMOTED,
    Evidence,
    Retirement,
    ServingState,
    Target,
    read_state,
    salvaged_retirement,
    split_row,
)
from candlefire_pipeline.operations.serving.table import (
    AUTO_PROMOTE,
    EVENTS,
    PROMOTE,
    PROMOTE_GENERATION,
    RETIRE,
    ROLLBACK,
    TRANSITIONS,
    UNRETIRE,
    WINDOW_EVENTS,
    WINDOW_FAILED,
    WINDOW_PASSED,
    Rule,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import REFERENCE

__all__ = [
    "AUTO_PROMOTE", "BACKEND_OF", "CHANGED", "DEGRADED", "EVENTS", "INITIAL", "PINNED",
    "PINNED_PGVECTOR", "PROMOTE", "PROMOTED", "PROMOTE_GENERATION", "REFUSED", "RETIRE",
    "ROLLBACK", "TRANSITIONS", "UNCHANGED", "UNRETIRE", "WINDOW_EVENTS", "WINDOW_FAILED",
    "WINDOW_PASSED", "Decision", "Evidence", "Outcome", "Rule", "ServingState", "Target",
    "decide", "read_state", "switch_lock", "sync_history", "transition",
]  # fmt: skip

log = logging.getLogger(__name__)

CHANGED, UNCHANGED, REFUSED = "changed", "unchanged", "refused"
NO_EVIDENCE = Evidence()


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
        return f"{state.row} -> {rule.target}"
    retired, soak = state.reference_retired, evidence.soak
    fields = {
        "since": retired.since if retired else "-",
        "changed_at": state.changed_at or "-",
        "actor": state.actor or "-",
        "soak": f"{soak.days:g}" if soak else "CANDLEFIRE_RETIRE_SOAK_DAYS",
        "rebuilt": evidence.rebuilt.describe() if evidence.rebuilt else "-",
        "source": "-",
        "count": 0,
    }
    window = evidence.window
    if window is not None:
        count = len(counted(state, window)) + (window.window_id not in counted(state, window))
        fields.update(source=window.source, count=count)
    return rule.why.format_map(fields)


def decide(state: ServingState, event: str, evidence: Evidence = NO_EVIDENCE) -> Decision:
    """The transition table applied to one event: pure, no I/O. Source and target are rows."""
    if event not in EVENTS:
        raise ValueError(f"unknown serving event {event!r}; expected one of {EVENTS}")
    if event in WINDOW_EVENTS and evidence.window is None:
        raise ValueError(f"{event} needs the window it judges (Evidence.window)")
    if event == PROMOTE_GENERATION and evidence.wanted is None:
        raise ValueError(f"{event} needs the target asked for (Evidence.wanted)")
    problems: list[str] = []
    row = state.row
    for rule in _rules(TRANSITIONS[(row, event)]):
        found = [p for g in rule.guards if (p := GUARDS[g](state, evidence))]
        if found:
            problems += found
            continue
        message = _message(rule, state, evidence)
        if rule.target is None:
            return Decision(event, row, row, REFUSED if rule.refused else UNCHANGED, message)
        return Decision(event, row, rule.target, CHANGED, message)
    return Decision(event, row, row, REFUSED, "; ".join(dict.fromkeys(problems)))


def failing_after(state: ServingState, decision: Decision, evidence: Evidence) -> dict:
    """The consecutive failing windows per source once `decision` applies (DEGRADED only)."""
    if split_row(decision.target)[0] != DEGRADED:
        return {}
    if evidence.window is None:  # not a window: the count stays as it was
        return dict(state.failing)
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
        # every state rolls back to the pin, so an unreadable switch must not stop a rollback;
        # one that still records a retired Chroma refuses it as a readable one would
        log.warning("the serving switch is unreadable; rolling back over it")
        return ServingState(state=PROMOTED, retired=salvaged_retirement(settings.serving_file))


def require_reason(verb: str, reason: str) -> None:
    """Every change of the switch is recorded with why: a blank reason is refused up front."""
    if not reason or not reason.strip():
        raise ValueError(f"{verb} needs a reason (--reason)")


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
    require_reason(event, reason)
    with switch_lock(settings):
        # a change a killed process queued but never made goes before this one is queued
        drop_unwritten(settings.serving_pending_file, settings.serving_file)
        current = _current(settings, event)
        evidence = _registry_now(settings, event, evidence)
        decision = decide(current, event, evidence)
        before = current
        if decision.outcome == CHANGED:
            # what a replica must have replayed before its readers follow this change
            recorded = {"wal_lsn": primary_lsn(dsn), "applied_lsn": current.applied_lsn}
            current = _next_state(current, decision, evidence, reason.strip(), actor)
            current = replace(current, **recorded)
            # queued first: a kill before the switch write leaves an entry that does not match
            # the switch (dropped under the lock), never a change without its history
            queue_entry(settings.serving_pending_file, _entry(current))
            write_atomic(settings.serving_file, current.to_json())
            log.info("serving switch: %s (%s)", current.describe(), decision.message)
    if current.generation != before.generation:
        # gc counts a generation's age from when it last served (never fails the switch)
        for name in (before.generation, current.generation):
            note_served(settings, name)
    history = _flush(settings, dsn)
    return Outcome(decision, current, history)


def _registry_now(settings: Settings, event: str, evidence: Evidence) -> Evidence:
    """A generation's registry state read again under the switch lock: gc marks a generation
    `dropping` under the same lock, so a promotion cannot race a drop."""
    if event != PROMOTE_GENERATION or evidence.wanted is None:
        return evidence
    try:
        registry = stored_registry(settings)
        if registry is None:  # only the implicit default generation: live by definition
            return evidence
        state = registry.get(evidence.wanted.generation).state
    except GenerationError as exc:
        state = f"unknown ({exc})"
    return replace(evidence, wanted_state=state)


def _next_state(
    current: ServingState, decision: Decision, evidence: Evidence, reason: str, actor: str
) -> ServingState:
    """The state a CHANGED decision writes, with the (backend, generation) it serves and what a
    rollback from there returns to. A rollback (an operator's, or the auto-rollback's after N
    failing windows) goes to the recorded target and keeps the report served on; a window
    keeps what serves and its reason starts with what it did (degraded, recovered,
    auto-rollback); a promotion records where it came from (the default generation always
    returns to Chroma, as before generations); a retirement or its undoing keeps what serves and
    records (or clears) since when Chroma is retired. Every other change keeps the retirement."""
    event, now = decision.event, datetime.now(UTC).isoformat()
    target, _ = split_row(decision.target)
    kept = {"retired": current.retired}
    if event in (*WINDOW_EVENTS, UNRETIRE):
        reason = f"{decision.message}: {reason}"
    if event == ROLLBACK or (event in WINDOW_EVENTS and target in PINNED_STATES):
        back = current.rollback_target
        previous = None if back.backend == REFERENCE else FLOOR
        return ServingState(target, now, current.report_id, reason, actor, event,
                            generation=back.generation, previous=previous, **kept)  # fmt: skip
    if event in (*WINDOW_EVENTS, RETIRE, UNRETIRE):
        if event == RETIRE:
            retirement = Retirement(now, evidence.report_id, evidence.reference_p95_ms)
            kept = {"retired": {**current.retired, REFERENCE: retirement}}
        elif event == UNRETIRE:
            kept = {"retired": {k: v for k, v in current.retired.items() if k != REFERENCE}}
        return ServingState(
            target, now, current.report_id, reason, actor, event,
            failing_after(current, decision, evidence), current.generation, current.previous,
            **kept,
        )  # fmt: skip
    wanted = evidence.wanted if event == PROMOTE_GENERATION else Target(BACKEND_OF[PROMOTED])
    previous = FLOOR if wanted.generation == FLOOR.generation else current.target
    return ServingState(target, now, evidence.report_id, reason, actor, event,
                        generation=wanted.generation, previous=previous, **kept)  # fmt: skip


def _entry(state: ServingState) -> dict:
    """The history row of a change: a retirement carries the report it was decided on."""
    previous = str(state.previous) if state.previous else None  # "backend/generation"
    retired = state.reference_retired
    report_id = retired.report_id if state.event == RETIRE and retired else state.report_id
    return {"entry_id": uuid.uuid4().hex, "backend": state.backend, **asdict(state),
            "previous": previous, "report_id": report_id,
            "retired": ",".join(sorted(state.retired)) or None}  # fmt: skip


def sync_history(settings: Settings, dsn: str | None) -> HistoryWrite:
    """Insert whatever history is still queued (any successful connection should call this)."""
    return _flush(settings, dsn)


def _flush(settings: Settings, dsn: str | None) -> HistoryWrite:
    """The queued history into Postgres, and the switch's published copy (an app without the
    file follows that one: operations/serving/published.py)."""
    written = flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings),
                    settings.serving_file)  # fmt: skip
    publish_switch(settings, dsn)
    return written
