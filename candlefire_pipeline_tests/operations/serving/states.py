"""The serving states and evidence the state-machine tests set up (shared by their modules)."""

from __future__ import annotations

from dataclasses import replace

from candlefire_pipeline.operations.serving.proofs import FailedWindow, Rebuilt, Soak
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    FLOOR,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    Evidence,
    Retirement,
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


# retiring Chroma: a 14-day soak judged on 2026-03-01 --------------------------------------
NOW, SOAK_DAYS = "2026-03-01T00:00:00+00:00", 14.0
DAYS_AGO = {n: f"2026-02-{29 - n:02d}T00:00:00+00:00" for n in range(1, 28)}  # 2026-02 has 28
RETIRED_AT = "2026-02-20T00:00:00+00:00"


def _soak(since: str | None = DAYS_AGO[20], failed=()) -> Soak:
    return Soak(SOAK_DAYS, NOW, since, tuple(failed))


def _retiring(soak: Soak, started: str = DAYS_AGO[1], gates=PASSING, report: str = "r-soak"):
    return Evidence(report, started, gates, soak=soak, reference_p95_ms=21.5)


_FAILED = FailedWindow(DAYS_AGO[5], "degraded: a shadow_parity window failed: w9 fails ...")
_CHECKED = Rebuilt("chroma", ("candlefire_chunks",), 3, 612, {"missing": 0, "orphaned": 0,
                                                               "stale": 0})  # fmt: skip
EVIDENCE.update({
    "soaked, passing report": _retiring(_soak()),
    "soak too short": _retiring(_soak(since=DAYS_AGO[3])),
    "a window failed inside the soak": _retiring(_soak(failed=[_FAILED])),
    "soaked, failing report": _retiring(_soak(), gates=FAILING),
    "soaked, report before the soak": _retiring(_soak(), started=DAYS_AGO[20]),
    "soaked, no report": Evidence(soak=_soak()),
    "the default never served": _retiring(_soak(since=None)),
    "every condition unmet": _retiring(_soak(DAYS_AGO[3], [_FAILED]), gates=FAILING),
    "rebuilt and checked": Evidence(rebuilt=_CHECKED),
    "rebuilt, differing": Evidence(rebuilt=replace(_CHECKED, differing={"missing": 2})),
})  # fmt: skip


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
#: the same states with Chroma retired (where pgvector serves)
_RETIREMENT = {"chroma": Retirement(RETIRED_AT, "r-retired", 21.5)}
STATES.update({
    f"{name}, chroma retired": replace(STATES[name], retired=_RETIREMENT)
    for name in (PROMOTED, DEGRADED, "degraded, two sources", PINNED_PGVECTOR, "pgvector@gen_a",
                 "degraded@gen_a")
})  # fmt: skip


def setup_state(name: str) -> ServingState:
    return STATES[name]
