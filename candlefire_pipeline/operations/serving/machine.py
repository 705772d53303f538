"""The serving switch as a state machine: the transition table with its guards, and the one
function that changes the switch (file first, atomically, under a lock; then history). The states
and the evidence the guards read live in operations/serving/state.py, the guards in
operations/serving/guards.py.

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

from candlefire_pipeline.fsutil import file_lock, write_atomic
from candlefire_pipeline.generations.registry import GenerationError, stored_registry
from candlefire_pipeline.generations.served import note_served
from candlefire_pipeline.operations.serving.guards import (
    ALL_CLEAR,
    BACK_TO_PGVECTOR,
    DEFAULT_SERVES,
    GATES_PASS,
    GENERATION_GUARDS,
    GUARDS,
    NEWER_THAN_PIN,
    ROLLBACK_DUE,
    SOURCE_CLEAR,
    WINDOW_COUNTED,
    counted,
)
from candlefire_pipeline.operations.serving.history import HistoryWrite, flush, queue_entry
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
    ServingState,
    Target,
    read_state,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import REFERENCE

log = logging.getLogger(__name__)

# events -------------------------------------------------------------------------
AUTO_PROMOTE = "auto_promote"  # the serving_backend asset (schedule, sensor, re-run)
PROMOTE = "promote"  # `candlefire promote --reason`
ROLLBACK = "rollback"  # `candlefire rollback --reason`
PROMOTE_GENERATION = "promote_generation"  # `candlefire promote --generation NAME --reason`
#: a fresh window of evidence while serving (parity_report, shadow_parity) failed / passed
WINDOW_FAILED = "window_failed"
WINDOW_PASSED = "window_passed"
WINDOW_EVENTS = (WINDOW_FAILED, WINDOW_PASSED)
EVENTS = (AUTO_PROMOTE, PROMOTE, ROLLBACK, *WINDOW_EVENTS, PROMOTE_GENERATION)
CHANGED, UNCHANGED, REFUSED = "changed", "unchanged", "refused"
NOT_WATCHED = "not serving pgvector: a window changes nothing"
PIN_NOT_WATCHED = "pinned by an operator: a window changes nothing"
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


#: Every rollback: back to the pgvector target it came from when that is where it returns
#: (a generation promoted over another pgvector one), else Chroma.
_ROLLBACK = (Rule(PINNED_PGVECTOR, (BACK_TO_PGVECTOR,)), Rule(PINNED))
_AUTO_ROLLBACK = "auto-rollback after {count} failing {source} windows"
#: N failing windows in a row with auto-rollback on: where a rollback goes, pinned.
_AUTO = (Rule(PINNED_PGVECTOR, (ROLLBACK_DUE, BACK_TO_PGVECTOR), why=_AUTO_ROLLBACK),
         Rule(PINNED, (ROLLBACK_DUE,), why=_AUTO_ROLLBACK))  # fmt: skip
_PINNED_AUTO = Rule(
    None,
    refused=True,
    why="pinned (by an operator or the auto-rollback): only `candlefire promote` leaves a pin",
)

#: (state, event) -> rule, or rules tried in order (the first whose guards all pass applies;
#: when none does, the event is refused with every guard's reason). Every pair is listed;
#: tests walk this table.
TRANSITIONS: dict[tuple[str, str], Rule | tuple[Rule, ...]] = {
    (INITIAL, AUTO_PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, ROLLBACK): Rule(PINNED),
    (INITIAL, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (INITIAL, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
    (INITIAL, PROMOTE_GENERATION): Rule(PROMOTED, GENERATION_GUARDS),
    (PROMOTED, AUTO_PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, PROMOTE): (
        Rule(None, (DEFAULT_SERVES,), why="already serving pgvector"),
        Rule(
            None,
            refused=True,
            why="another generation serves: `candlefire promote "
            "--generation default` returns to the default one",
        ),
    ),  # fmt: skip
    (PROMOTED, ROLLBACK): _ROLLBACK,
    (PROMOTED, WINDOW_FAILED): (*_AUTO, Rule(DEGRADED, why="degraded: a {source} window failed")),
    (PROMOTED, WINDOW_PASSED): Rule(None, why="healthy: nothing to clear"),
    (PROMOTED, PROMOTE_GENERATION): Rule(PROMOTED, GENERATION_GUARDS),
    (DEGRADED, AUTO_PROMOTE): Rule(None, why="already serving pgvector (degraded)"),
    # an operator who has looked re-arms the watch, on a report passing every gate
    (DEGRADED, PROMOTE): Rule(PROMOTED, (DEFAULT_SERVES, GATES_PASS)),
    (DEGRADED, ROLLBACK): _ROLLBACK,
    (DEGRADED, WINDOW_FAILED): (
        Rule(None, (WINDOW_COUNTED,), why="this window was already counted"),
        *_AUTO,
        Rule(DEGRADED, why="still degraded: {count} failing {source} windows in a row"),
    ),
    (DEGRADED, WINDOW_PASSED): (
        Rule(None, (SOURCE_CLEAR,), why="no failing {source} window to clear"),
        Rule(PROMOTED, (ALL_CLEAR,), why="recovered: a {source} window passed"),
        Rule(DEGRADED, why="still degraded: {source} recovered, another source still fails"),
    ),
    (DEGRADED, PROMOTE_GENERATION): Rule(PROMOTED, GENERATION_GUARDS),
    (PINNED, AUTO_PROMOTE): _PINNED_AUTO,
    (PINNED, PROMOTE): Rule(PROMOTED, (GATES_PASS, NEWER_THAN_PIN)),
    (PINNED, ROLLBACK): Rule(PINNED),  # a new pin replaces the old one (new reason, new time)
    (PINNED, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (PINNED, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
    (PINNED, PROMOTE_GENERATION): Rule(PROMOTED, (*GENERATION_GUARDS, NEWER_THAN_PIN)),
    (PINNED_PGVECTOR, AUTO_PROMOTE): _PINNED_AUTO,
    (PINNED_PGVECTOR, PROMOTE): Rule(PROMOTED, (DEFAULT_SERVES, GATES_PASS, NEWER_THAN_PIN)),
    (PINNED_PGVECTOR, ROLLBACK): _ROLLBACK,
    (PINNED_PGVECTOR, WINDOW_FAILED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR, WINDOW_PASSED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR, PROMOTE_GENERATION): Rule(PROMOTED, (*GENERATION_GUARDS, NEWER_THAN_PIN)),
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
    if event == PROMOTE_GENERATION and evidence.wanted is None:
        raise ValueError(f"{event} needs the target asked for (Evidence.wanted)")
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
        evidence = _registry_now(settings, event, evidence)
        decision = decide(current, event, evidence)
        before = current
        if decision.outcome == CHANGED:
            current = _next_state(current, decision, evidence, reason.strip(), actor)
            write_atomic(settings.serving_file, current.to_json())
            queue_entry(settings.serving_pending_file, _entry(current))
            log.info("serving switch: %s (%s)", current.describe(), decision.message)
    if current.generation != before.generation:
        # gc counts a generation's age from when it last served (never fails the switch)
        for name in (before.generation, current.generation):
            note_served(settings, name)
    history = flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
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
    returns to Chroma, as before generations)."""
    event, now = decision.event, datetime.now(UTC).isoformat()
    if event in WINDOW_EVENTS:
        reason = f"{decision.message}: {reason}"
    if event == ROLLBACK or (event in WINDOW_EVENTS and decision.target in PINNED_STATES):
        back = current.rollback_target
        previous = None if back.backend == REFERENCE else FLOOR
        return ServingState(decision.target, now, current.report_id, reason, actor, event,
                            generation=back.generation, previous=previous)  # fmt: skip
    if event in WINDOW_EVENTS:
        return ServingState(
            decision.target, now, current.report_id, reason, actor, event,
            failing_after(current, decision, evidence), current.generation, current.previous,
        )  # fmt: skip
    wanted = evidence.wanted if event == PROMOTE_GENERATION else Target(BACKEND_OF[PROMOTED])
    previous = FLOOR if wanted.generation == FLOOR.generation else current.target
    return ServingState(decision.target, now, evidence.report_id, reason, actor, event,
                        generation=wanted.generation, previous=previous)  # fmt: skip


def _entry(state: ServingState) -> dict:
    previous = str(state.previous) if state.previous else None  # "backend/generation"
    return {"entry_id": uuid.uuid4().hex, "backend": state.backend, **asdict(state),
            "previous": previous}  # fmt: skip


def sync_history(settings: Settings, dsn: str | None) -> HistoryWrite:
    """Insert whatever history is still queued (any successful connection should call this)."""
    return flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
