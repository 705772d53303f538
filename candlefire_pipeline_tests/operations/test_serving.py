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
    FLOOR,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTE,
    PROMOTE_GENERATION,
    PROMOTED,
    REFUSED,
    ROLLBACK,
    UNCHANGED,
    Evidence,
    ServingState,
    Target,
    decide,
    read_state,
    switch_lock,
    transition,
)
from candlefire_pipeline.operations.serving_history import history, pending_entries
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings

PIN_TIME = "2026-01-01T12:00:00+00:00"
NEWER, OLDER = "2026-01-02T00:00:00+00:00", "2025-12-31T00:00:00+00:00"
PASSING = tuple(GateResult(n, True, 1.0, 1.0, "ok") for n in GATES)
FAILING = tuple(GateResult(n, n != "p95_ratio", 1.0, 1.0, "x") for n in GATES)
GEN_A, DEFAULT_PG = Target("pgvector", "gen_a"), Target("pgvector", "default")


def _compared(wanted: Target, started: str = NEWER, gates=PASSING, state="live", against=None):
    """A generation's comparison: with what serves (unless `against`), for `wanted`."""
    return lambda serving: Evidence(
        "c-" + wanted.generation, started, gates, wanted, state,
        (against or serving.target, wanted),
    )  # fmt: skip


EVIDENCE = {
    "passing, newer than the pin": lambda _: Evidence("r-new", NEWER, PASSING),
    "passing, older than the pin": lambda _: Evidence("r-old", OLDER, PASSING),
    "failing gates": lambda _: Evidence("r-fail", NEWER, FAILING),
    "no report": lambda _: Evidence(),
    "gen_a compared with what serves": _compared(GEN_A),
    "gen_a compared, older than the pin": _compared(GEN_A, OLDER),
    "gen_a compared with another target": _compared(GEN_A, against=Target("pgvector", "x")),
    "gen_a failing its comparison": _compared(GEN_A, gates=FAILING),
    "gen_a dropped": _compared(GEN_A, state="dropped"),
    "gen_a never compared": lambda _: Evidence(wanted=GEN_A, wanted_state="live"),
    "default compared with what serves": _compared(DEFAULT_PG),
}

#: The states tests start from: name -> (state, generation served, previous)
SETUPS = {
    INITIAL: (INITIAL, "default", None),
    PROMOTED: (PROMOTED, "default", None),
    "pgvector@gen_a": (PROMOTED, "gen_a", DEFAULT_PG),
    "pgvector@gen_b from chroma": (PROMOTED, "gen_b", FLOOR),
    PINNED: (PINNED, "default", None),
    PINNED_PGVECTOR: (PINNED_PGVECTOR, "default", FLOOR),
    "pgvector_pinned@gen_b": (PINNED_PGVECTOR, "gen_b", FLOOR),
}

#: The expected table, written out by hand (not derived from serving.TRANSITIONS):
#: (setup, event, evidence) -> (outcome, state after, what serves after, words the message holds)
EXPECTED = [
    (INITIAL, AUTO_PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, "pgvector/default",
     ""),
    (INITIAL, AUTO_PROMOTE, "failing gates", REFUSED, INITIAL, "chroma/default",
     "fails gates: p95_ratio"),
    (INITIAL, AUTO_PROMOTE, "no report", REFUSED, INITIAL, "chroma/default", "no parity report"),
    # no pin to beat
    (INITIAL, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED, "pgvector/default", ""),
    (INITIAL, PROMOTE, "failing gates", REFUSED, INITIAL, "chroma/default", "p95_ratio"),
    (INITIAL, PROMOTE, "no report", REFUSED, INITIAL, "chroma/default", "no parity report"),
    (INITIAL, ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED,
     "pgvector/gen_a", ""),
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with another target", REFUSED, INITIAL,
     "chroma/default", "compared pgvector/gen_a with pgvector/x, but chroma/default serves"),
    (INITIAL, PROMOTE_GENERATION, "gen_a failing its comparison", REFUSED, INITIAL,
     "chroma/default", "report c-gen_a fails gates: p95_ratio"),
    (INITIAL, PROMOTE_GENERATION, "gen_a dropped", REFUSED, INITIAL, "chroma/default",
     "generation gen_a is dropped, not live"),
    (INITIAL, PROMOTE_GENERATION, "gen_a never compared", REFUSED, INITIAL, "chroma/default",
     "run `candlefire generation compare gen_a`"),
    (PROMOTED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED,
     "pgvector/default", "already"),
    (PROMOTED, AUTO_PROMOTE, "failing gates", UNCHANGED, PROMOTED, "pgvector/default", "already"),
    (PROMOTED, PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "pgvector/default",
     "already"),
    (PROMOTED, ROLLBACK, "passing, newer than the pin", CHANGED, PINNED, "chroma/default", ""),
    (PROMOTED, ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    (PROMOTED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED,
     "pgvector/gen_a", ""),
    (PROMOTED, PROMOTE_GENERATION, "default compared with what serves", REFUSED, PROMOTED,
     "pgvector/default", "pgvector/default serves already"),
    ("pgvector@gen_a", AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED,
     "pgvector/gen_a", "already"),
    ("pgvector@gen_a", PROMOTE, "passing, newer than the pin", REFUSED, PROMOTED,
     "pgvector/gen_a", "--generation default` returns"),
    # back to the pgvector target it was promoted over, pinned there
    ("pgvector@gen_a", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR, "pgvector/default", ""),
    ("pgvector@gen_a", PROMOTE_GENERATION, "default compared with what serves", CHANGED,
     PROMOTED, "pgvector/default", ""),
    ("pgvector@gen_a", PROMOTE_GENERATION, "gen_a compared with what serves", REFUSED, PROMOTED,
     "pgvector/gen_a", "pgvector/gen_a serves already"),
    ("pgvector@gen_b from chroma", ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    # the pin holds against every automatic run, whatever the report
    (PINNED, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED, "chroma/default",
     "candlefire promote"),
    (PINNED, AUTO_PROMOTE, "passing, older than the pin", REFUSED, PINNED, "chroma/default",
     "pinned"),
    (PINNED, AUTO_PROMOTE, "no report", REFUSED, PINNED, "chroma/default", "pinned"),
    (PINNED, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, "pgvector/default", ""),
    (PINNED, PROMOTE, "passing, older than the pin", REFUSED, PINNED, "chroma/default",
     "not newer than the pin"),
    (PINNED, PROMOTE, "failing gates", REFUSED, PINNED, "chroma/default", "p95_ratio"),
    (PINNED, PROMOTE, "no report", REFUSED, PINNED, "chroma/default", "no parity report"),
    (PINNED, ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    (PINNED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED,
     "pgvector/gen_a", ""),
    (PINNED, PROMOTE_GENERATION, "gen_a compared, older than the pin", REFUSED, PINNED,
     "chroma/default", "not newer than the pin (2026-01-01T12:00:00+00:00): run a new comparison"),
    (PINNED_PGVECTOR, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED_PGVECTOR,
     "pgvector/default", "pinned"),
    (PINNED_PGVECTOR, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED,
     "pgvector/default", ""),
    (PINNED_PGVECTOR, PROMOTE, "passing, older than the pin", REFUSED, PINNED_PGVECTOR,
     "pgvector/default", "not newer than the pin"),
    (PINNED_PGVECTOR, ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED,
     "pgvector/gen_a", ""),
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared, older than the pin", REFUSED,
     PINNED_PGVECTOR, "pgvector/default", "not newer than the pin"),
    ("pgvector_pinned@gen_b", PROMOTE, "passing, newer than the pin", REFUSED, PINNED_PGVECTOR,
     "pgvector/gen_b", "generation gen_b serves"),
    ("pgvector_pinned@gen_b", ROLLBACK, "no report", CHANGED, PINNED, "chroma/default", ""),
    ("pgvector_pinned@gen_b", PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED,
     PROMOTED, "pgvector/gen_a", ""),
]  # fmt: skip


def _state(setup: str) -> ServingState:
    state, generation, previous = SETUPS[setup]
    if state == INITIAL:
        return ServingState()
    report = "r-promoted" if state == PROMOTED else None
    return ServingState(state, PIN_TIME, report, "set up by the test", "tester", "setup",
                        generation, previous)  # fmt: skip


def test_the_table_lists_every_state_and_event_and_the_test_covers_every_pair():
    states = {INITIAL, PROMOTED, PINNED, PINNED_PGVECTOR}
    assert set(serving.TRANSITIONS) == {(s, e) for s in states for e in serving.EVENTS}
    assert {(SETUPS[s][0], e) for s, e, *_ in EXPECTED} == set(serving.TRANSITIONS)


@pytest.mark.parametrize("setup, event, evidence, outcome, after, serves, words", EXPECTED)
def test_decide(setup, event, evidence, outcome, after, serves, words):
    state = _state(setup)
    decision = decide(state, event, EVIDENCE[evidence](state))
    assert (decision.outcome, decision.target, decision.source) == (outcome, after, state.state)
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


@pytest.mark.parametrize("setup, event, evidence, outcome, after, serves, words", EXPECTED)
def test_transition_writes_the_switch_and_history_only_on_a_change(
    settings, pg_dsn, setup, event, evidence, outcome, after, serves, words
):
    start = _state(setup)
    if setup != INITIAL:
        _write(settings, start)
    before = settings.serving_file.read_bytes() if settings.serving_file.exists() else None
    reason = f"test {setup}/{event}/{evidence}"
    proof = EVIDENCE[evidence](start)
    result = transition(settings, event, reason, "tester", proof, dsn=pg_dsn)
    assert (result.decision.outcome, result.state.state) == (outcome, after)
    on_disk = read_state(settings.serving_file)
    assert on_disk == result.state and on_disk.backend == serving.BACKEND_OF[after]
    assert str(on_disk.target) == serves
    rows = [h for h in history(pg_dsn, limit=500) if h["reason"] == reason]
    if outcome == CHANGED:
        assert (on_disk.reason, on_disk.actor, on_disk.event) == (reason, "tester", event)
        expected_report = start.report_id if event == ROLLBACK else proof.report_id
        assert on_disk.report_id == expected_report
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
    _write(settings, _state(setup))
    for serves in chain:
        state = transition(settings, ROLLBACK, "step back", "tester").state
        assert (str(state.target), state.pinned) == (serves, True)


def test_a_promotion_records_where_a_rollback_returns(settings):
    proof = EVIDENCE["gen_a compared with what serves"]
    for setup, previous in ((INITIAL, FLOOR), (PROMOTED, DEFAULT_PG),
                            ("pgvector_pinned@gen_b", Target("pgvector", "gen_b"))):  # fmt: skip
        _write(settings, _state(setup))
        state = transition(settings, PROMOTE_GENERATION, "go", "t", proof(_state(setup))).state
        assert (state.target, state.previous, state.rollback_target) == (GEN_A, previous, previous)
    # the default generation always returns to Chroma, as before generations
    _write(settings, _state("pgvector@gen_a"))
    back = EVIDENCE["default compared with what serves"](_state("pgvector@gen_a"))
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
            settings, AUTO_PROMOTE, "auto", "dagster", EVIDENCE["passing, newer than the pin"](None)
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
            settings, AUTO_PROMOTE, "auto", "dagster", EVIDENCE["passing, newer than the pin"](None)
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
