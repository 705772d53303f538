"""The serving state machine through the Python API: every (state, event) pair of the table,
each guard, the switch file and the Postgres history it leaves behind."""

from __future__ import annotations

import json
import threading
import time

import pytest

from candlefire_pipeline.operations import serving
from candlefire_pipeline.operations.serving import (
    AUTO_PROMOTE,
    CHANGED,
    PROMOTE,
    PROMOTE_GENERATION,
    REFUSED,
    ROLLBACK,
    UNCHANGED,
    WINDOW_EVENTS,
    WINDOW_FAILED,
    WINDOW_PASSED,
    decide,
    switch_lock,
    transition,
)
from candlefire_pipeline.operations.serving_history import history, pending_entries
from candlefire_pipeline.operations.serving_state import (
    BACKEND_OF,
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
    read_state,
)
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings

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


def _evidence(name: str, state: ServingState) -> Evidence:
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
#: (state, event, evidence) -> (outcome, state after, words the message must contain)
EXPECTED = [
    (INITIAL, AUTO_PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (INITIAL, AUTO_PROMOTE, "failing gates", REFUSED, INITIAL, "fails gates: p95_ratio"),
    (INITIAL, AUTO_PROMOTE, "no report", REFUSED, INITIAL, "no parity report"),
    (INITIAL, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED, ""),  # no pin to beat
    (INITIAL, PROMOTE, "failing gates", REFUSED, INITIAL, "p95_ratio"),
    (INITIAL, PROMOTE, "no report", REFUSED, INITIAL, "no parity report"),
    (INITIAL, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        INITIAL,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        INITIAL,
        "not serving pgvector",
    ),  # fmt: skip
    (INITIAL, WINDOW_PASSED, "passing window", UNCHANGED, INITIAL, "not serving pgvector"),
    (PROMOTED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, AUTO_PROMOTE, "failing gates", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, ROLLBACK, "passing, newer than the pin", CHANGED, PINNED, ""),
    (PROMOTED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PROMOTED, WINDOW_FAILED, "failing window", CHANGED, DEGRADED, "degraded: a shadow_parity"),
    (
        PROMOTED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        DEGRADED,
        "degraded",
    ),  # fmt: skip
    (
        PROMOTED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        CHANGED,
        PINNED,
        "auto-rollback after 1 failing shadow_parity windows",
    ),  # fmt: skip
    (PROMOTED, WINDOW_PASSED, "passing window", UNCHANGED, PROMOTED, "healthy"),
    (DEGRADED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, DEGRADED, "already"),
    (DEGRADED, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED, ""),  # re-arms
    (DEGRADED, PROMOTE, "failing gates", REFUSED, DEGRADED, "p95_ratio"),
    (DEGRADED, PROMOTE, "no report", REFUSED, DEGRADED, "no parity report"),
    (DEGRADED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window",
        CHANGED,
        DEGRADED,
        "still degraded: 2 failing shadow_parity windows in a row",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 3",
        CHANGED,
        DEGRADED,
        "still degraded: 2",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        PINNED,
        "auto-rollback after 2 failing shadow_parity windows",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "the counted window again, auto-rollback after 1",
        UNCHANGED,
        DEGRADED,
        "already counted",
    ),  # fmt: skip
    (DEGRADED, WINDOW_PASSED, "passing window", CHANGED, PROMOTED, "recovered"),
    (
        DEGRADED,
        WINDOW_PASSED,
        "passing report window",
        UNCHANGED,
        DEGRADED,
        "no failing parity_report window",
    ),  # fmt: skip
    (
        "degraded, two sources",
        WINDOW_PASSED,
        "passing window",
        CHANGED,
        DEGRADED,
        "another source still fails",
    ),  # fmt: skip
    (
        "degraded, two sources",
        WINDOW_PASSED,
        "passing report window",
        CHANGED,
        DEGRADED,
        "parity_report recovered",
    ),  # fmt: skip
    # the pin holds against every automatic run, whatever the report
    (PINNED, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED, "candlefire promote"),
    (PINNED, AUTO_PROMOTE, "passing, older than the pin", REFUSED, PINNED, "pinned"),
    (PINNED, AUTO_PROMOTE, "no report", REFUSED, PINNED, "pinned"),
    (PINNED, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (PINNED, PROMOTE, "passing, older than the pin", REFUSED, PINNED, "not newer than the pin"),
    (PINNED, PROMOTE, "failing gates", REFUSED, PINNED, "p95_ratio"),
    (PINNED, PROMOTE, "no report", REFUSED, PINNED, "no parity report"),
    (PINNED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        PINNED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        PINNED,
        "not serving pgvector",
    ),  # fmt: skip
    (PINNED, WINDOW_PASSED, "passing window", UNCHANGED, PINNED, "not serving pgvector"),
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a compared with another target",
        REFUSED,
        INITIAL,
        "compared pgvector/gen_a with pgvector/x, but chroma/default serves",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a failing its comparison",
        REFUSED,
        INITIAL,
        "report c-gen_a fails gates: p95_ratio",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a dropped",
        REFUSED,
        INITIAL,
        "generation gen_a is dropped, not live",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a never compared",
        REFUSED,
        INITIAL,
        "run `candlefire generation compare gen_a`",
    ),
    (PROMOTED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PROMOTED,
        PROMOTE_GENERATION,
        "default compared with what serves",
        REFUSED,
        PROMOTED,
        "pgvector/default serves already",
    ),
    ("pgvector@gen_a", AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (
        "pgvector@gen_a",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PROMOTED,
        "--generation default` returns",
    ),
    ("pgvector@gen_a", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR, ""),
    (
        "pgvector@gen_a",
        PROMOTE_GENERATION,
        "default compared with what serves",
        CHANGED,
        PROMOTED,
        "",
    ),
    (
        "pgvector@gen_a",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
        REFUSED,
        PROMOTED,
        "pgvector/gen_a serves already",
    ),
    ("pgvector@gen_b from chroma", ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PINNED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PINNED,
        PROMOTE_GENERATION,
        "gen_a compared, older than the pin",
        REFUSED,
        PINNED,
        "not newer than the pin (2026-01-01T12:00:00+00:00): run a new comparison",
    ),
    (
        PINNED_PGVECTOR,
        AUTO_PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "pinned",
    ),
    (PINNED_PGVECTOR, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (
        PINNED_PGVECTOR,
        PROMOTE,
        "passing, older than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "not newer than the pin",
    ),
    (PINNED_PGVECTOR, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PINNED_PGVECTOR,
        PROMOTE_GENERATION,
        "gen_a compared, older than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "not newer than the pin",
    ),
    (
        "pgvector_pinned@gen_b",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "generation gen_b serves",
    ),
    ("pgvector_pinned@gen_b", ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        "pgvector_pinned@gen_b",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
        CHANGED,
        PROMOTED,
        "",
    ),
    # generations and the windows of the states they add
    (
        PINNED_PGVECTOR,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        PINNED_PGVECTOR,
        "pinned by an operator",
    ),
    (PINNED_PGVECTOR, WINDOW_PASSED, "passing window", UNCHANGED, PINNED_PGVECTOR, "pinned"),
    (DEGRADED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        "degraded@gen_a",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        DEGRADED,
        "generation gen_a serves",
    ),
    ("degraded@gen_a", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR, ""),
    # the auto-rollback returns where a rollback does: the target gen_a was promoted over
    (
        "degraded@gen_a",
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        PINNED_PGVECTOR,
        "auto-rollback after 2 failing shadow_parity windows",
    ),
    (
        "pgvector@gen_a",
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        CHANGED,
        PINNED_PGVECTOR,
        "auto-rollback after 1",
    ),
    ("pgvector@gen_a", WINDOW_FAILED, "failing window", CHANGED, DEGRADED, "degraded"),
]

#: (setup, event, evidence) -> the (backend/generation) serving after, where it is not the
#: default generation on the state's backend
SERVES_AFTER = {
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PROMOTED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("pgvector@gen_a", AUTO_PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PINNED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("pgvector_pinned@gen_b", PROMOTE, "passing, newer than the pin"): "pgvector/gen_b",
    (
        "pgvector_pinned@gen_b",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
    ): "pgvector/gen_a",
    (DEGRADED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("degraded@gen_a", PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", WINDOW_FAILED, "failing window"): "pgvector/gen_a",
}


def _serves_after(state: str, event: str, evidence: str, after: str) -> str:
    return SERVES_AFTER.get((state, event, evidence), f"{BACKEND_OF[after]}/default")


#: what each window that changes the switch leaves in `failing` (source -> windows in a row)
FAILING_AFTER = {
    (PROMOTED, "failing window"): {SHADOW: ["w2"]},
    (PROMOTED, "failing window, auto-rollback after 2"): {SHADOW: ["w2"]},
    (DEGRADED, "failing window"): {SHADOW: ["w1", "w2"]},
    (DEGRADED, "failing window, auto-rollback after 3"): {SHADOW: ["w1", "w2"]},
    ("degraded, two sources", "passing window"): {REPORT: ["r-bad"]},
    ("degraded, two sources", "passing report window"): {SHADOW: ["w1"]},
    ("pgvector@gen_a", "failing window"): {SHADOW: ["w2"]},
}


def _state(name: str) -> ServingState:
    return STATES[name]


def test_the_table_lists_every_state_and_event_and_the_test_covers_every_pair():
    states = {INITIAL, PROMOTED, DEGRADED, PINNED, PINNED_PGVECTOR}
    events = set(serving.EVENTS)
    assert set(BACKEND_OF) == states
    assert set(serving.TRANSITIONS) == {(s, e) for s in states for e in events}
    assert {(STATES[s].state, e) for s, e, *_ in EXPECTED} == set(serving.TRANSITIONS)


@pytest.mark.parametrize("state, event, evidence, outcome, after, words", EXPECTED)
def test_decide(state, event, evidence, outcome, after, words):
    decision = decide(_state(state), event, _evidence(evidence, _state(state)))
    assert (decision.outcome, decision.target, decision.source) == (
        outcome, after, STATES[state].state,
    )  # fmt: skip
    assert words in decision.message


@pytest.mark.parametrize("event", WINDOW_EVENTS)
def test_a_window_event_without_its_window_is_an_error(event):
    with pytest.raises(ValueError, match="needs the window"):
        decide(STATES[DEGRADED], event, Evidence())


def test_unknown_event_is_an_error():
    with pytest.raises(ValueError, match="unknown serving event"):
        decide(ServingState(), "flip")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops")


def _write(settings: Settings, state: ServingState) -> None:
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text(state.to_json())


@pytest.mark.parametrize("state, event, evidence, outcome, after, words", EXPECTED)
def test_transition_writes_the_switch_and_history_only_on_a_change(
    settings, pg_dsn, state, event, evidence, outcome, after, words
):
    if state != INITIAL:
        _write(settings, _state(state))
    before = settings.serving_file.read_bytes() if settings.serving_file.exists() else None
    reason = f"test {state}/{event}/{evidence}"
    proof = _evidence(evidence, _state(state))
    result = transition(settings, event, reason, "tester", proof, dsn=pg_dsn)
    assert (result.decision.outcome, result.state.state) == (outcome, after)
    on_disk = read_state(settings.serving_file)
    assert on_disk == result.state and on_disk.backend == BACKEND_OF[after]
    assert str(on_disk.target) == _serves_after(state, event, evidence, after)
    rows = [h for h in history(pg_dsn, limit=500) if h["reason"].endswith(reason)]
    if outcome == CHANGED:
        assert on_disk.reason.endswith(reason) and (on_disk.actor, on_disk.event) == (
            "tester", event,
        )  # fmt: skip
        if event in WINDOW_EVENTS:  # the reason says what the window did
            assert on_disk.reason == f"{result.decision.message}: {reason}"
        keeps_report = event == ROLLBACK or event in WINDOW_EVENTS
        expected_report = _state(state).report_id if keeps_report else proof.report_id
        assert on_disk.report_id == expected_report
        assert on_disk.failing == FAILING_AFTER.get((state, evidence), {})
        previous = str(on_disk.previous) if on_disk.previous else None
        assert [(r["backend"], r["state"], r["event"], r["report_id"], r["generation"],
                 r["previous"]) for r in rows] == [
            (on_disk.backend, after, event, expected_report, on_disk.target.generation, previous)
        ]  # fmt: skip
    else:  # nothing half-written: same bytes, no history row
        now = settings.serving_file.read_bytes() if settings.serving_file.exists() else None
        assert now == before and rows == []
    assert pending_entries(settings.serving_pending_file) == []


#: what a rollback from each target returns to, and what a rollback from there returns to
ROLLBACK_CHAINS = [
    (INITIAL, ["chroma/default", "chroma/default"]),
    (PROMOTED, ["chroma/default", "chroma/default"]),
    ("pgvector@gen_a", ["pgvector/default", "chroma/default"]),
    ("pgvector@gen_b from chroma", ["chroma/default"]),
    ("pgvector_pinned@gen_b", ["chroma/default"]),
]


@pytest.mark.parametrize("setup, chain", ROLLBACK_CHAINS)
def test_rollbacks_step_back_to_the_recorded_target_then_to_chroma(settings, setup, chain):
    _write(settings, STATES[setup])
    for serves in chain:
        state = transition(settings, ROLLBACK, "step back", "tester").state
        assert (str(state.target), state.pinned) == (serves, True)


def test_a_promotion_records_where_a_rollback_returns(settings):
    proof = EVIDENCE["gen_a compared with what serves"]
    for setup, previous in ((INITIAL, FLOOR), (PROMOTED, DEFAULT_PG),
                            ("pgvector_pinned@gen_b", Target("pgvector", "gen_b"))):  # fmt: skip
        _write(settings, STATES[setup])
        state = transition(settings, PROMOTE_GENERATION, "go", "t", proof(STATES[setup])).state
        assert (state.target, state.previous, state.rollback_target) == (GEN_A, previous, previous)
    # the default generation always returns to Chroma, as before generations
    _write(settings, STATES["pgvector@gen_a"])
    back = EVIDENCE["default compared with what serves"](STATES["pgvector@gen_a"])
    state = transition(settings, PROMOTE_GENERATION, "back", "t", back).state
    assert (state.target, state.rollback_target) == (DEFAULT_PG, FLOOR)


def test_a_reason_is_required(settings):
    for reason in ("", "   "):
        with pytest.raises(ValueError, match="needs a reason"):
            transition(settings, ROLLBACK, reason, "tester")
    assert not settings.serving_file.exists()


def test_a_switch_file_from_before_the_state_machine_is_read_safely(settings):
    settings.serving_file.parent.mkdir(parents=True)
    legacy = {"backend": "chroma", "changed_at": "2025-01-01T00:00:00Z", "report_id": None,
              "reason": "rollback"}  # fmt: skip
    settings.serving_file.write_text(json.dumps(legacy))
    assert read_state(settings.serving_file).state == PINNED  # a recorded rollback stays a pin
    settings.serving_file.write_text(json.dumps({**legacy, "backend": "pgvector"}))
    assert read_state(settings.serving_file).state == PROMOTED
    settings.serving_file.write_text(json.dumps({"backend": "chroma"}))
    assert read_state(settings.serving_file).state == INITIAL
    # a file from before generations serves the default one and rolls back to Chroma
    settings.serving_file.write_text(json.dumps({**legacy, "backend": "pgvector"}))
    state = read_state(settings.serving_file)
    assert (state.generation, state.previous, state.rollback_target) == ("default", None, FLOOR)


@pytest.mark.parametrize(
    "content, error",
    [
        ("{not json", "not valid JSON"),
        ('{"backend": "qdrant"}', "unknown serving backend"),
        ('{"backend": "chroma", "state": "pgvector"}', "does not serve"),
        ('{"backend": "chroma", "generation": "g1"}', "Chroma serves the default generation"),
        ('{"backend": "pgvector", "previous": {"backend": "qdrant"}}', "servable backend"),
    ],
)
def test_a_broken_switch_refuses_promotion_but_not_rollback(settings, content, error):
    settings.serving_file.parent.mkdir(parents=True)
    settings.serving_file.write_text(content)
    with pytest.raises(ValueError, match=error):
        read_state(settings.serving_file)
    with pytest.raises(ValueError, match=error):
        transition(
            settings, AUTO_PROMOTE, "auto", "dagster", EVIDENCE["passing, newer than the pin"]
        )
    assert settings.serving_file.read_text() == content
    outcome = transition(settings, ROLLBACK, "switch file was broken", "tester")
    assert outcome.decision.outcome == CHANGED and read_state(settings.serving_file).pinned


def test_a_decision_sees_a_pin_written_while_it_waited_for_the_lock(settings):
    """The asset's read-decide-write runs under the switch lock: a rollback that got the lock
    first is what the asset decides on, so it cannot overwrite the pin with pgvector."""
    results = {}

    def scheduled_run():
        results["auto"] = transition(
            settings, AUTO_PROMOTE, "auto", "dagster", EVIDENCE["passing, newer than the pin"]
        )

    with switch_lock(settings):
        worker = threading.Thread(target=scheduled_run)
        worker.start()
        time.sleep(0.3)
        assert worker.is_alive()  # waiting for the lock
        _write(settings, _state(PINNED))  # what a rollback holding the lock writes
    worker.join(timeout=30)
    assert results["auto"].decision.outcome == REFUSED
    assert read_state(settings.serving_file).state == PINNED
