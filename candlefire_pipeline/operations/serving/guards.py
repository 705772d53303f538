"""The guards of the serving switch's transition table: each names a condition and says, for
a state and its evidence, None when it holds, else why not (operations/serving/machine.py)."""

from __future__ import annotations

from datetime import datetime

from candlefire_pipeline.generations.identity import DEFAULT_NAME, LIVE
from candlefire_pipeline.operations.serving.state import Evidence, ServingState, Window
from candlefire_pipeline.parity.gate_result import failed
from candlefire_pipeline.stores import CANDIDATE

GATES_PASS = "gates_pass"  # the latest report (or comparison) passes every gate, evaluated now
NEWER_THAN_PIN = "report_newer_than_pin"  # that report started after the pin was set
DEFAULT_SERVES = "default_generation_serves"  # plain promote is the default generation's flip
BACK_TO_PGVECTOR = "rollback_target_on_pgvector"  # what a rollback returns to is on pgvector
GENERATION_LIVE = "generation_live"  # the generation asked for is live in the registry
NOT_SERVING = "not_what_serves"  # the target asked for is not what serves now
COMPARED_WITH_SERVING = "compared_with_what_serves"  # its latest comparison had it as reference
WINDOW_COUNTED = "window_already_counted"  # this failing window was counted before
ROLLBACK_DUE = "auto_rollback_due"  # auto-rollback is on and this window makes N in a row
SOURCE_CLEAR = "source_not_failing"  # the passing window's source had no failing window
ALL_CLEAR = "all_sources_clear"  # once this source is cleared, no source is failing


def _time(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def _no_evidence(evidence: Evidence) -> str:
    if evidence.wanted is None:
        return "no parity report yet: run parity_report (or `candlefire promote --run-report`)"
    name = evidence.wanted.generation
    return f"generation {name} has no comparison yet: run `candlefire generation compare {name}`"


def _gates_pass(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.report_id is None:
        return _no_evidence(evidence)
    if not evidence.gates:
        return f"report {evidence.report_id} was not evaluated"
    names = failed(list(evidence.gates))
    return f"report {evidence.report_id} fails gates: {', '.join(names)}" if names else None


def _newer_than_pin(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.report_id is None:
        return _no_evidence(evidence)
    started, pinned_at = _time(evidence.started_at), _time(state.changed_at)
    if started is None or pinned_at is None or started <= pinned_at:
        again = "parity report" if evidence.wanted is None else "comparison"
        return (
            f"report {evidence.report_id} (started {evidence.started_at or 'unknown'}) is not "
            f"newer than the pin ({state.changed_at}): run a new {again}"
        )
    return None


def _default_serves(state: ServingState, evidence: Evidence) -> str | None:
    if state.generation == DEFAULT_NAME:
        return None
    return (
        f"generation {state.generation} serves: `candlefire promote` flips the default "
        "generation only; `candlefire promote --generation default` returns to it"
    )


def _back_to_pgvector(state: ServingState, evidence: Evidence) -> str | None:
    target = state.rollback_target
    return None if target.backend == CANDIDATE else f"the rollback target is {target}"


def _generation_live(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.wanted_state == LIVE:
        return None
    name = evidence.wanted.generation if evidence.wanted else "?"
    return f"generation {name} is {evidence.wanted_state or 'unknown'}, not live"


def _not_serving(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.wanted != state.target:
        return None
    return f"{state.target} serves already ({state.state}): promote another target to leave it"


def _compared_with_serving(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.compared is None:
        return _no_evidence(evidence)
    reference, candidate = evidence.compared
    if (reference, candidate) == (state.target, evidence.wanted):
        return None
    return (
        f"comparison {evidence.report_id} compared {candidate} with {reference}, but "
        f"{state.target} serves now and {evidence.wanted} is asked for: run "
        f"`candlefire generation compare {evidence.wanted.generation}` again"
    )


def counted(state: ServingState, window: Window) -> list[str]:
    """The window source's failing windows in a row, oldest first."""
    return state.failing.get(window.source, [])


def _window_counted(state: ServingState, evidence: Evidence) -> str | None:
    window = evidence.window
    return None if window.window_id in counted(state, window) else "a new window"


def _rollback_due(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.rollback_after is None:
        return "auto-rollback is off"
    count = len(counted(state, evidence.window)) + 1
    if count < evidence.rollback_after:
        return f"{count} of {evidence.rollback_after} failing windows before auto-rollback"
    return None


def _source_clear(state: ServingState, evidence: Evidence) -> str | None:
    return "its source has failing windows" if counted(state, evidence.window) else None


def _all_clear(state: ServingState, evidence: Evidence) -> str | None:
    others = sorted(set(state.failing) - {evidence.window.source})
    return f"still failing: {', '.join(others)}" if others else None


#: guard -> (state, evidence) -> None when it holds, else why not
GUARDS = {
    GATES_PASS: _gates_pass,
    NEWER_THAN_PIN: _newer_than_pin,
    DEFAULT_SERVES: _default_serves,
    BACK_TO_PGVECTOR: _back_to_pgvector,
    GENERATION_LIVE: _generation_live,
    NOT_SERVING: _not_serving,
    COMPARED_WITH_SERVING: _compared_with_serving,
    WINDOW_COUNTED: _window_counted,
    ROLLBACK_DUE: _rollback_due,
    SOURCE_CLEAR: _source_clear,
    ALL_CLEAR: _all_clear,
}
#: A generation's promotion: the guards every such transition checks, in the order they are told.
GENERATION_GUARDS = (GENERATION_LIVE, NOT_SERVING, COMPARED_WITH_SERVING, GATES_PASS)
