"""A promoted deployment watches itself: every fresh window of evidence (a parity report, a
shadow window) is judged by the gates and sent to the switch as window_failed / window_passed.

While pgvector serves, a failing window marks the switch DEGRADED (an error-level log line, the
status, the UI); with CANDLEFIRE_AUTO_ROLLBACK=on, N failing windows in a row of one source pin
the rollback target (Chroma; for another generation, the target it was promoted from). A window
judges one generation: the default's by the parity report and the shadow reads, another's by its
own comparison with its rollback target (`<name>/parity_report`). The table in
operations/serving/machine.py decides; this module only builds the event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.serving.machine import (
    CHANGED,
    WINDOW_FAILED,
    WINDOW_PASSED,
    Outcome,
    transition,
)
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    PINNED,
    PROMOTED,
    Evidence,
    ServingState,
    Window,
    read_state,
)
from candlefire_pipeline.parity.gates import GateResult
from candlefire_pipeline.parity.shadow.gates import SHADOW_GATES, agreement, judged_floor
from candlefire_pipeline.parity.shadow.window import ShadowWindow
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

log = logging.getLogger(__name__)

REPORT_SOURCE = "parity_report"
SHADOW_SOURCE = "shadow_parity"
#: Not judged while serving: freshness says a batch landed during the run, not that the stores
#: disagree (the next report is judged instead).
UNWATCHED_GATES = frozenset({"report_is_fresh"})
#: The gates each source is watched on: a report on its own gates (the live ones are the other
#: source's), a shadow window on agreement only (failing reads of the shadow target say that
#: the rollback target is unwell, not the store that serves; they fail shadow_errors instead).
WATCHED_BY = {
    REPORT_SOURCE: lambda name: name not in UNWATCHED_GATES and name not in SHADOW_GATES,
    SHADOW_SOURCE: lambda name: name == "shadow_agreement",
}


@dataclass(frozen=True)
class WatchResult:
    """What a window did to the switch: `level` is the log level it deserves."""

    window: Window | None  # None: nothing conclusive to send
    outcome: Outcome | None  # None: not sent (not serving pgvector, nothing conclusive)
    message: str
    level: int = logging.INFO


def judge(source: str, window_id: str, gates: Iterable[GateResult]) -> Window:
    """The window as the switch sees it: the failed gates it is watched on."""
    judged = [g for g in gates if WATCHED_BY[source](g.name)]
    failed = tuple(g.name for g in judged if not g.passed)
    detail = "; ".join(f"{g.name}: {g.detail}" for g in judged if not g.passed)
    return Window(source, window_id, failed, detail)


def shadow_window_verdict(settings: Settings, window: ShadowWindow) -> Window | None:
    """The window as the switch sees it while pgvector serves: the agreement of pgvector's
    answers with Chroma's shadow reads; None when it holds too few comparisons to judge (low
    traffic is not a failure, and not a pass either)."""
    pair = window.target(CANDIDATE, REFERENCE)  # served -> shadow
    if pair is None or pair.compared < judged_floor(settings.parity):
        return None
    where = f"shadow window {window.window_id} ({pair.pair})"
    return judge(SHADOW_SOURCE, window.window_id, [agreement(pair, where, settings.parity)])


def watch(
    settings: Settings, window: Window | None, actor: str, dsn: str | None,
    judged: str = DEFAULT_NAME,
) -> WatchResult:  # fmt: skip
    """Send one window to the switch if pgvector serves the generation it `judged`; never
    raises for an unreadable switch (the reader serves Chroma then: nothing to watch)."""
    if window is None:
        return WatchResult(None, None, "no conclusive window: nothing sent to the switch")
    try:
        state = read_state(settings.serving_file)
    except ValueError as exc:
        return WatchResult(window, None, f"switch unreadable, not watched: {exc}", logging.WARNING)
    if state.backend != "pgvector" or state.pinned:
        return WatchResult(window, None, f"serving {state.describe()}: not watched")
    if state.generation != judged:
        # a window judges one generation's stores; what serves is watched by its own windows
        return WatchResult(window, None, f"serving {state.describe()}: this window judges "
                           f"generation {judged}, not watched")  # fmt: skip
    event = WINDOW_FAILED if window.failed else WINDOW_PASSED
    verdict = f"fails {', '.join(window.failed)}" if window.failed else "passes every gate"
    reason = f"{window.source} window {window.window_id} {verdict}"
    if window.detail:
        reason += f" ({window.detail})"
    evidence = Evidence(window=window, rollback_after=settings.watch.rollback_after)
    outcome = transition(settings, event, reason, actor, evidence, dsn=dsn)
    message, level = _said(outcome)
    log.log(level, "%s", message)
    return WatchResult(window, outcome, message, level)


def _said(outcome: Outcome) -> tuple[str, int]:
    decision, state = outcome.decision, outcome.state
    if decision.outcome != CHANGED:
        level = logging.ERROR if state.state == DEGRADED else logging.INFO
        return f"serving {state.describe()}: {decision.message}", level
    if state.state == DEGRADED:
        return (
            f"SERVING DEGRADED: {state.reason}. pgvector still serves; {state.way_back()}"
            + _auto_note(state),
            logging.ERROR,
        )
    if state.state == PINNED:
        return (
            f"AUTO-ROLLBACK: Chroma serves, pinned until `candlefire promote`: {state.reason}",
            logging.ERROR,
        )
    if state.state == PROMOTED:
        return f"serving pgvector recovered: {state.reason}", logging.WARNING
    return f"serving {state.describe()}: {decision.message}", logging.INFO


def _auto_note(state: ServingState) -> str:
    counts = ", ".join(f"{s} {len(ids)}" for s, ids in sorted(state.failing.items()))
    return f" (failing windows in a row: {counts})"


def serving_health(state: ServingState) -> tuple[bool, str]:
    """(healthy, why) for the `serving_not_degraded` checks: DEGRADED fails, and so does a pin
    the auto-rollback set (an operator has to look, then `candlefire promote`)."""
    if state.state == DEGRADED:
        return False, state.describe()
    if state.pinned and state.event == WINDOW_FAILED:
        return False, f"auto-rolled back to Chroma: {state.describe()}"
    return True, state.describe()
