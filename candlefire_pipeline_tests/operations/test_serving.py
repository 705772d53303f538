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
    INITIAL,
    PINNED,
    PROMOTED,
    Evidence,
    ServingState,
    Window,
    read_state,
)
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings

PIN_TIME = "2026-01-01T12:00:00+00:00"
PASSING = tuple(GateResult(n, True, 1.0, 1.0, "ok") for n in GATES)
FAILING = tuple(GateResult(n, n != "p95_ratio", 1.0, 1.0, "x") for n in GATES)
SHADOW, REPORT = "shadow_parity", "parity_report"


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
}

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
}

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
]

#: what each window that changes the switch leaves in `failing` (source -> windows in a row)
FAILING_AFTER = {
    (PROMOTED, "failing window"): {SHADOW: ["w2"]},
    (PROMOTED, "failing window, auto-rollback after 2"): {SHADOW: ["w2"]},
    (DEGRADED, "failing window"): {SHADOW: ["w1", "w2"]},
    (DEGRADED, "failing window, auto-rollback after 3"): {SHADOW: ["w1", "w2"]},
    ("degraded, two sources", "passing window"): {REPORT: ["r-bad"]},
    ("degraded, two sources", "passing report window"): {SHADOW: ["w1"]},
}


def _state(name: str) -> ServingState:
    return STATES[name]


def test_the_table_lists_every_state_and_event_and_the_test_covers_every_pair():
    states, events = {INITIAL, PROMOTED, DEGRADED, PINNED}, set(serving.EVENTS)
    assert set(BACKEND_OF) == states
    assert set(serving.TRANSITIONS) == {(s, e) for s in states for e in events}
    assert {(STATES[s].state, e) for s, e, *_ in EXPECTED} == set(serving.TRANSITIONS)


@pytest.mark.parametrize("state, event, evidence, outcome, after, words", EXPECTED)
def test_decide(state, event, evidence, outcome, after, words):
    decision = decide(_state(state), event, EVIDENCE[evidence])
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
    result = transition(settings, event, reason, "tester", EVIDENCE[evidence], dsn=pg_dsn)
    assert (result.decision.outcome, result.state.state) == (outcome, after)
    on_disk = read_state(settings.serving_file)
    assert on_disk == result.state and on_disk.backend == BACKEND_OF[after]
    rows = [h for h in history(pg_dsn, limit=500) if h["reason"].endswith(reason)]
    if outcome == CHANGED:
        assert on_disk.reason.endswith(reason) and (on_disk.actor, on_disk.event) == (
            "tester", event,
        )  # fmt: skip
        if event in WINDOW_EVENTS:  # the reason says what the window did
            assert on_disk.reason == f"{result.decision.message}: {reason}"
        keeps_report = event == ROLLBACK or event in WINDOW_EVENTS
        expected_report = _state(state).report_id if keeps_report else EVIDENCE[evidence].report_id
        assert on_disk.report_id == expected_report
        assert on_disk.failing == FAILING_AFTER.get((state, evidence), {})
        assert [(r["backend"], r["state"], r["event"], r["report_id"]) for r in rows] == [
            (on_disk.backend, after, event, expected_report)
        ]
    else:  # nothing half-written: same bytes, no history row
        now = settings.serving_file.read_bytes() if settings.serving_file.exists() else None
        assert now == before and rows == []
    assert pending_entries(settings.serving_pending_file) == []


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


@pytest.mark.parametrize(
    "content, error",
    [
        ("{not json", "not valid JSON"),
        ('{"backend": "qdrant"}', "unknown serving backend"),
        ('{"backend": "chroma", "state": "pgvector"}', "does not serve"),
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
