"""The serving switch as a state machine: its states, the transition table with its guards, and
the one function that changes the switch (file first, atomically, under a lock; then history).

The app reads `serving_backend.json` ("backend" is what to serve). Every caller -- the
serving_backend asset, `candlefire rollback/promote`, the app-facing reader -- goes through here.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from candlefire_pipeline.fsutil import file_lock, write_atomic
from candlefire_pipeline.operations.serving_history import HistoryWrite, flush, queue_entry
from candlefire_pipeline.parity.gates import GateResult, failed
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE, SERVABLE_STORES

log = logging.getLogger(__name__)

# states ------------------------------------------------------------------------------------
INITIAL = "chroma"  # never promoted: candle-fire serves from Chroma, as it does today
PROMOTED = "pgvector"  # promoted on a report that passed every gate
PINNED = "chroma_pinned"  # an operator rolled back: Chroma until `candlefire promote`
BACKEND_OF = {INITIAL: REFERENCE, PROMOTED: CANDIDATE, PINNED: REFERENCE}

# events and guards -------------------------------------------------------------------------
AUTO_PROMOTE = "auto_promote"  # the serving_backend asset (schedule, sensor, re-run)
PROMOTE = "promote"  # `candlefire promote --reason`
ROLLBACK = "rollback"  # `candlefire rollback --reason`
EVENTS = (AUTO_PROMOTE, PROMOTE, ROLLBACK)
GATES_PASS = "gates_pass"  # the latest report passes every gate, evaluated now
NEWER_THAN_PIN = "report_newer_than_pin"  # that report started after the pin was set

CHANGED, UNCHANGED, REFUSED = "changed", "unchanged", "refused"


@dataclass(frozen=True)
class Rule:
    """target None: the event changes nothing; `refused` says whether that is a refusal (an
    operator gets a non-zero exit) or simply nothing to do."""

    target: str | None
    guards: tuple[str, ...] = ()
    refused: bool = False
    why: str = ""


#: (state, event) -> rule. Every pair is listed; tests walk this table.
TRANSITIONS: dict[tuple[str, str], Rule] = {
    (INITIAL, AUTO_PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, ROLLBACK): Rule(PINNED),
    (PROMOTED, AUTO_PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, ROLLBACK): Rule(PINNED),
    (PINNED, AUTO_PROMOTE): Rule(
        None,
        refused=True,
        why="pinned to Chroma by an operator: only `candlefire promote` leaves a pin",
    ),  # fmt: skip
    (PINNED, PROMOTE): Rule(PROMOTED, (GATES_PASS, NEWER_THAN_PIN)),
    (PINNED, ROLLBACK): Rule(PINNED),  # a new pin replaces the old one (new reason, new time)
}


@dataclass(frozen=True)
class ServingState:
    state: str = INITIAL
    changed_at: str | None = None  # UTC ISO 8601 of the last change
    report_id: str | None = None  # the report promoted on (or left, for a pin)
    reason: str = "initial: candle-fire serves from Chroma"
    actor: str | None = None  # who: an operator's name, or the Dagster asset
    event: str | None = None

    @property
    def backend(self) -> str:
        return BACKEND_OF[self.state]

    @property
    def pinned(self) -> bool:
        return self.state == PINNED

    def to_json(self) -> str:
        return json.dumps({"backend": self.backend, **asdict(self)}, indent=2) + "\n"

    def describe(self) -> str:
        if self.state == INITIAL:
            return "chroma (never promoted)"
        if self.state == PROMOTED:
            return f"pgvector (promoted on report {self.report_id} at {self.changed_at})"
        return f"chroma (PINNED by {self.actor} at {self.changed_at}: {self.reason})"


@dataclass(frozen=True)
class Evidence:
    """What the guards look at: the latest report and its gates, evaluated now."""

    report_id: str | None = None
    started_at: str | None = None
    gates: tuple[GateResult, ...] = ()

    @classmethod
    def of(cls, report, gates) -> Evidence:
        if report is None:
            return cls()
        return cls(report.report_id, report.started_at or None, tuple(gates))


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


def _time(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def _guard_failure(guard: str, state: ServingState, evidence: Evidence) -> str | None:
    if evidence.report_id is None:
        return "no parity report yet: run parity_report (or `candlefire promote --run-report`)"
    if guard == GATES_PASS:
        if not evidence.gates:
            return f"report {evidence.report_id} was not evaluated"
        names = failed(list(evidence.gates))
        return f"report {evidence.report_id} fails gates: {', '.join(names)}" if names else None
    started, pinned_at = _time(evidence.started_at), _time(state.changed_at)
    if started is None or pinned_at is None or started <= pinned_at:
        return (
            f"report {evidence.report_id} (started {evidence.started_at or 'unknown'}) is not "
            f"newer than the pin ({state.changed_at}): run a new parity report"
        )
    return None


def decide(state: ServingState, event: str, evidence: Evidence = Evidence()) -> Decision:
    """The transition table applied to one event: pure, no I/O."""
    if event not in EVENTS:
        raise ValueError(f"unknown serving event {event!r}; expected one of {EVENTS}")
    rule = TRANSITIONS[(state.state, event)]
    if rule.target is None:
        return Decision(event, state.state, state.state, REFUSED if rule.refused else UNCHANGED,
                        rule.why)  # fmt: skip
    problems = [p for g in rule.guards if (p := _guard_failure(g, state, evidence))]
    if problems:
        return Decision(
            event, state.state, state.state, REFUSED, "; ".join(dict.fromkeys(problems))
        )
    return Decision(event, state.state, rule.target, CHANGED, f"{state.state} -> {rule.target}")


# the switch file -----------------------------------------------------------------------------
def read_state(path: Path) -> ServingState:
    """The current switch; the never-promoted state when nothing was ever recorded."""
    if not Path(path).exists():
        return ServingState()
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: the serving switch is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or data.get("backend") not in SERVABLE_STORES:
        raise ValueError(f"{path}: unknown serving backend {data.get('backend')!r}")
    state = data.get("state") or _legacy_state(data)
    if state not in BACKEND_OF or BACKEND_OF[state] != data["backend"]:
        raise ValueError(f"{path}: state {state!r} does not serve {data['backend']!r}")
    fields = {k: data.get(k) for k in ServingState.__dataclass_fields__ if k in data}
    return ServingState(**{**fields, "state": state})


def _legacy_state(data: dict) -> str:
    """A file from before the state machine: pgvector was a promotion; a recorded Chroma change
    was an operator's rollback, so it stays a pin."""
    if data["backend"] == CANDIDATE:
        return PROMOTED
    return PINNED if data.get("changed_at") else INITIAL


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
    evidence: Evidence = Evidence(),
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
            report_id = current.report_id if event == ROLLBACK else evidence.report_id
            current = ServingState(
                decision.target, datetime.now(UTC).isoformat(), report_id, reason.strip(),
                actor, event,
            )  # fmt: skip
            write_atomic(settings.serving_file, current.to_json())
            queue_entry(settings.serving_pending_file, _entry(current))
            log.info("serving switch: %s (%s)", current.describe(), decision.message)
    history = flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
    return Outcome(decision, current, history)


def _entry(state: ServingState) -> dict:
    return {"entry_id": uuid.uuid4().hex, "backend": state.backend, **asdict(state)}


def sync_history(settings: Settings, dsn: str | None) -> HistoryWrite:
    """Insert whatever history is still queued (any successful connection should call this)."""
    return flush(dsn, settings.serving_pending_file, lambda: switch_lock(settings))
