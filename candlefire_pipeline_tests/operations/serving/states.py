"""The serving states and evidence the state-machine tests set up (shared by their modules)."""

from __future__ import annotations

from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    FLOOR,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    Evidence,
    ServingState,
    Target,
    Window,
)
from candlefire_pipeline.parity.gates import GATES, GateResult

PIN_TIME = "2026-01-01T12:00:00+00:00"
PASSING = tuple(GateResult(n, True, 1.0, 1.0, "ok") for n in GATES)
FAILING = tuple(GateResult(n, n != "p95_ratio", 1.0, 1.0, "x") for n in GATES)
SHADOW, REPORT = "shadow_parity", "parity_report"
NEWER, OLDER = "2026-01-02T00:00:00+00:00", "2025-12-31T00:00:00+00:00"
GEN_A, DEFAULT_PG = Target("pgvector", "gen_a"), Target("pgvector", "default")


def _compared(wanted: Target, started: str = NEWER, gates=PASSING, state="live", against=None):
    """A generation's comparison: with what serves (unless `against`), for `wanted`."""
    return lambda serving: Evidence(
        "c-" + wanted.generation, started, gates, wanted=wanted, wanted_state=state,
        compared=(against or serving.target, wanted),
    )  # fmt: skip


def _failing_window(window_id: str, rollback_after: int | None = None) -> Evidence:
    window = Window(SHADOW, window_id, ("shadow_agreement",), "mean overlap 0.41 < 0.9")
    return Evidence(window=window, rollback_after=rollback_after)


EVIDENCE = {
    "passing, newer than the pin": Evidence("r-new", "2026-01-02T00:00:00+00:00", PASSING),
    "passing, older than the pin": Evidence("r-old", "2025-12-31T00:00:00+00:00", PASSING),
    "failing gates": Evidence("r-fail", "2026-01-02T00:00:00+00:00", FAILING),
    "no report": Evidence(),
    "failing window": _failing_window("w2"),
    "failing window, auto-rollback after 1": _failing_window("w2", rollback_after=1),
    "failing window, auto-rollback after 2": _failing_window("w2", rollback_after=2),
    "failing window, auto-rollback after 3": _failing_window("w2", rollback_after=3),
    "the counted window again, auto-rollback after 1": _failing_window("w1", rollback_after=1),
    "passing window": Evidence(window=Window(SHADOW, "w3")),
    "passing report window": Evidence(window=Window(REPORT, "r-good")),
    # a generation's evidence depends on what serves (the comparison's reference)
    "gen_a compared with what serves": _compared(GEN_A),
    "gen_a compared, older than the pin": _compared(GEN_A, OLDER),
    "gen_a compared with another target": _compared(GEN_A, against=Target("pgvector", "x")),
    "gen_a failing its comparison": _compared(GEN_A, gates=FAILING),
    "gen_a dropped": _compared(GEN_A, state="dropped"),
    "gen_a never compared": lambda _: Evidence(wanted=GEN_A, wanted_state="live"),
    "default compared with what serves": _compared(DEFAULT_PG),
}


def evidence_for(name: str, state: ServingState) -> Evidence:
    found = EVIDENCE[name]
    return found(state) if callable(found) else found


#: States as a test sets them up; DEGRADED has one failing shadow window (w1), and
#: "degraded, two sources" a failing report window as well.
STATES = {
    INITIAL: ServingState(),
    PROMOTED: ServingState(PROMOTED, PIN_TIME, "r-promoted", "set up", "tester", "setup"),
    DEGRADED: ServingState(
        DEGRADED, PIN_TIME, "r-promoted", "set up", "tester", "setup", {SHADOW: ["w1"]}
    ),
    "degraded, two sources": ServingState(
        DEGRADED,
        PIN_TIME,
        "r-promoted",
        "set up",
        "tester",
        "setup",
        {SHADOW: ["w1"], REPORT: ["r-bad"]},
    ),  # fmt: skip
    PINNED: ServingState(PINNED, PIN_TIME, None, "set up by the test", "tester", "setup"),
    # generations: what serves, and where a rollback returns
    "pgvector@gen_a": ServingState(PROMOTED, PIN_TIME, "r-promoted", "set up", "tester",
                                   "setup", generation="gen_a", previous=DEFAULT_PG),
    "pgvector@gen_b from chroma": ServingState(PROMOTED, PIN_TIME, "r-promoted", "set up",
                                               "tester", "setup", generation="gen_b",
                                               previous=FLOOR),
    "degraded@gen_a": ServingState(DEGRADED, PIN_TIME, "r-promoted", "set up", "tester", "setup",
                                   {SHADOW: ["w1"]}, "gen_a", DEFAULT_PG),
    PINNED_PGVECTOR: ServingState(PINNED_PGVECTOR, PIN_TIME, None, "set up by the test",
                                  "tester", "setup", previous=FLOOR),
    "pgvector_pinned@gen_b": ServingState(PINNED_PGVECTOR, PIN_TIME, None, "set up by the test",
                                          "tester", "setup", generation="gen_b", previous=FLOOR),
}  # fmt: skip

#: The expected table, written out by hand (not derived from serving.TRANSITIONS):


def setup_state(name: str) -> ServingState:
    return STATES[name]
