"""The guards of the serving switch's transition table: each names a condition and says, for
a state and its evidence, None when it holds, else why not (operations/serving/machine.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from candlefire_pipeline.generations.identity import DEFAULT_NAME, LIVE
from candlefire_pipeline.operations.serving.proofs import days_between, parse_time
from candlefire_pipeline.operations.serving.state import Evidence, ServingState, Window
from candlefire_pipeline.parity.gate_result import failed
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

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
# retiring Chroma, and its way back (operations/serving/proofs.py holds the evidence)
SOAKED = "soak_served"  # pgvector served the default generation for the whole soak
WINDOWS_PASSED = "soak_windows_passed"  # no watched window failed inside the soak
REPORT_IN_SOAK = "report_inside_soak"  # the latest report started inside the soak
REBUILT = "rebuilt_from_ledger"  # the retired store was rebuilt and matches its ledger


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
    started, pinned_at = parse_time(evidence.started_at), parse_time(state.changed_at)
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


Guard = Callable[[ServingState, Evidence], str | None]


def _needs_soak(guard: Guard) -> Guard:
    """A guard of retirement's soak: without soak evidence it says so and judges nothing else."""

    @functools.wraps(guard)
    def judged(state: ServingState, evidence: Evidence) -> str | None:
        if not evidence.soak:
            return "no soak evidence: `candlefire retire` gathers it"
        return guard(state, evidence)

    return judged


@_needs_soak
def _soaked(state: ServingState, evidence: Evidence) -> str | None:
    soak = evidence.soak
    if state.generation != DEFAULT_NAME:
        return (
            f"generation {state.generation} serves: retiring {REFERENCE} needs the default "
            f"generation served on pgvector through a {soak.days:g}-day soak"
        )
    if soak.serving_since is None:
        return "the switch history shows no promotion of the default generation to pgvector"
    served = days_between(parse_time(soak.serving_since), parse_time(soak.now))
    if served >= soak.days:
        return None
    return (
        f"pgvector has served the default generation since {soak.serving_since} ({served:.1f} "
        f"of the {soak.days:g}-day soak): retire after {soak.after(soak.serving_since)}"
    )


@_needs_soak
def _windows_passed(state: ServingState, evidence: Evidence) -> str | None:
    soak = evidence.soak
    if not soak.failed:
        return None
    last = max(soak.failed, key=lambda w: parse_time(w.at))
    return (
        f"{len(soak.failed)} watched window(s) failed inside the {soak.days:g}-day soak, the "
        f"last at {last.at} ({last.what}): retire after {soak.after(last.at)} if none fails"
    )


@_needs_soak
def _report_in_soak(state: ServingState, evidence: Evidence) -> str | None:
    started = parse_time(evidence.started_at)
    if evidence.report_id is None or (started is not None and started >= evidence.soak.began):
        return None  # no report at all: gates_pass says so
    when = evidence.started_at or "at an unknown time"
    return (
        f"the latest parity report {evidence.report_id} started {when}, before the soak began "
        f"({evidence.soak.began.isoformat()}): run parity_report"
    )


def _rebuilt(state: ServingState, evidence: Evidence) -> str | None:
    rebuilt = evidence.rebuilt
    if rebuilt is None:
        return (
            f"{REFERENCE} was not rebuilt from the ledger: `candlefire unretire {REFERENCE} "
            '--reason "..."` rebuilds it and checks it'
        )
    if rebuilt.clean:
        return None
    counts = ", ".join(f"{n} {kind}" for kind, n in rebuilt.differing.items() if n)
    return f"the rebuilt {rebuilt.store} differs from its ledger ({counts}): still retired"


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
    SOAKED: _soaked,
    WINDOWS_PASSED: _windows_passed,
    REPORT_IN_SOAK: _report_in_soak,
    REBUILT: _rebuilt,
}
#: A generation's promotion: the guards every such transition checks, in the order they are told.
GENERATION_GUARDS = (GENERATION_LIVE, NOT_SERVING, COMPARED_WITH_SERVING, GATES_PASS)
#: Retiring Chroma from the promoted state: every condition is checked and every failure told.
RETIRE_GUARDS = (SOAKED, WINDOWS_PASSED, REPORT_IN_SOAK, GATES_PASS)
