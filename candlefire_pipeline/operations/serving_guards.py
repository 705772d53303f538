"""The guards of the serving switch's transition table: each names a condition and says, for
a state and its evidence, None when it holds, else why not (operations/serving.py)."""

from __future__ import annotations

from datetime import datetime

from candlefire_pipeline.operations.serving_state import Evidence, ServingState, Window
from candlefire_pipeline.parity.gate_result import failed

GATES_PASS = "gates_pass"  # the latest report passes every gate, evaluated now
NEWER_THAN_PIN = "report_newer_than_pin"  # that report started after the pin was set
WINDOW_COUNTED = "window_already_counted"  # this failing window was counted before
ROLLBACK_DUE = "auto_rollback_due"  # auto-rollback is on and this window makes N in a row
SOURCE_CLEAR = "source_not_failing"  # the passing window's source had no failing window
ALL_CLEAR = "all_sources_clear"  # once this source is cleared, no source is failing


def _time(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def _gates_pass(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.report_id is None:
        return "no parity report yet: run parity_report (or `candlefire promote --run-report`)"
    if not evidence.gates:
        return f"report {evidence.report_id} was not evaluated"
    names = failed(list(evidence.gates))
    return f"report {evidence.report_id} fails gates: {', '.join(names)}" if names else None


def _newer_than_pin(state: ServingState, evidence: Evidence) -> str | None:
    if evidence.report_id is None:
        return "no parity report yet: run parity_report (or `candlefire promote --run-report`)"
    started, pinned_at = _time(evidence.started_at), _time(state.changed_at)
    if started is None or pinned_at is None or started <= pinned_at:
        return (
            f"report {evidence.report_id} (started {evidence.started_at or 'unknown'}) is not "
            f"newer than the pin ({state.changed_at}): run a new parity report"
        )
    return None


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
    WINDOW_COUNTED: _window_counted,
    ROLLBACK_DUE: _rollback_due,
    SOURCE_CLEAR: _source_clear,
    ALL_CLEAR: _all_clear,
}
