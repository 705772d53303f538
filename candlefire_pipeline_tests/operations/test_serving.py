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
    INITIAL,
    PINNED,
    PROMOTE,
    PROMOTED,
    REFUSED,
    ROLLBACK,
    UNCHANGED,
    Evidence,
    ServingState,
    decide,
    read_state,
    switch_lock,
    transition,
)
from candlefire_pipeline.operations.serving_history import history, pending_entries
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings

PIN_TIME = "2026-01-01T12:00:00+00:00"
PASSING = tuple(GateResult(n, True, 1.0, 1.0, "ok") for n in GATES)
FAILING = tuple(GateResult(n, n != "p95_ratio", 1.0, 1.0, "x") for n in GATES)

EVIDENCE = {
    "passing, newer than the pin": Evidence("r-new", "2026-01-02T00:00:00+00:00", PASSING),
    "passing, older than the pin": Evidence("r-old", "2025-12-31T00:00:00+00:00", PASSING),
    "failing gates": Evidence("r-fail", "2026-01-02T00:00:00+00:00", FAILING),
    "no report": Evidence(),
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
    (PROMOTED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, AUTO_PROMOTE, "failing gates", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, ROLLBACK, "passing, newer than the pin", CHANGED, PINNED, ""),
    (PROMOTED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    # the pin holds against every automatic run, whatever the report
    (PINNED, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED, "candlefire promote"),
    (PINNED, AUTO_PROMOTE, "passing, older than the pin", REFUSED, PINNED, "pinned"),
    (PINNED, AUTO_PROMOTE, "no report", REFUSED, PINNED, "pinned"),
    (PINNED, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (PINNED, PROMOTE, "passing, older than the pin", REFUSED, PINNED, "not newer than the pin"),
    (PINNED, PROMOTE, "failing gates", REFUSED, PINNED, "p95_ratio"),
    (PINNED, PROMOTE, "no report", REFUSED, PINNED, "no parity report"),
    (PINNED, ROLLBACK, "no report", CHANGED, PINNED, ""),
]


def _state(name: str) -> ServingState:
    if name == INITIAL:
        return ServingState()
    report = "r-promoted" if name == PROMOTED else None
    return ServingState(name, PIN_TIME, report, "set up by the test", "tester", "setup")


def test_the_table_lists_every_state_and_event_and_the_test_covers_every_pair():
    states, events = {INITIAL, PROMOTED, PINNED}, set(serving.EVENTS)
    assert set(serving.TRANSITIONS) == {(s, e) for s in states for e in events}
    assert {(s, e) for s, e, *_ in EXPECTED} == set(serving.TRANSITIONS)


@pytest.mark.parametrize("state, event, evidence, outcome, after, words", EXPECTED)
def test_decide(state, event, evidence, outcome, after, words):
    decision = decide(_state(state), event, EVIDENCE[evidence])
    assert (decision.outcome, decision.target, decision.source) == (outcome, after, state)
    assert words in decision.message


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
    assert on_disk == result.state and on_disk.backend == serving.BACKEND_OF[after]
    rows = [h for h in history(pg_dsn, limit=500) if h["reason"] == reason]
    if outcome == CHANGED:
        assert (on_disk.reason, on_disk.actor, on_disk.event) == (reason, "tester", event)
        expected_report = "r-promoted" if event == ROLLBACK and state == PROMOTED else None
        if event != ROLLBACK:
            expected_report = EVIDENCE[evidence].report_id
        assert on_disk.report_id == expected_report
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
