"""The serving switch through the Python API: the switch file and the Postgres history each
transition leaves behind, rollback chains, old and broken switch files, the lock."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from candlefire_pipeline.operations.serving.history import history, pending_entries
from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    CHANGED,
    PROMOTE_GENERATION,
    REFUSED,
    RETIRE,
    ROLLBACK,
    UNRETIRE,
    WINDOW_EVENTS,
    switch_lock,
    transition,
)
from candlefire_pipeline.operations.serving.state import (
    BACKEND_OF,
    FLOOR,
    INITIAL,
    PINNED,
    PROMOTED,
    ServingState,
    Target,
    read_state,
    split_row,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.locks import wait_until_blocked
from candlefire_pipeline_tests.operations.serving.expected import (
    EXPECTED,
    FAILING_AFTER,
    SERVES_AFTER,
    serves_after,
)
from candlefire_pipeline_tests.operations.serving.expected_retired import (
    EXPECTED_RETIRED,
    FAILING_AFTER_RETIRED,
    SERVES_AFTER_RETIRED,
)
from candlefire_pipeline_tests.operations.serving.states import (
    DEFAULT_PG,
    EVIDENCE,
    GEN_A,
    STATES,
    evidence_for,
    setup_state,
)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops")


def _write(settings: Settings, state: ServingState) -> None:
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text(state.to_json())


def _lock_file(settings: Settings) -> Path:
    """The file switch_lock locks (beside the switch file)."""
    return settings.serving_file.with_name(settings.serving_file.name + ".lock")


SERVES_AFTER.update(SERVES_AFTER_RETIRED)
FAILING = {**FAILING_AFTER, **FAILING_AFTER_RETIRED}


@pytest.mark.parametrize("state, event, evidence, outcome, after, words",
                         EXPECTED + EXPECTED_RETIRED)  # fmt: skip
def test_transition_writes_the_switch_and_history_only_on_a_change(
    settings, pg_dsn, state, event, evidence, outcome, after, words
):
    if state != INITIAL:
        _write(settings, setup_state(state))
    before = settings.serving_file.read_bytes() if settings.serving_file.exists() else None
    reason = f"test {state}/{event}/{evidence}"
    proof = evidence_for(evidence, setup_state(state))
    result = transition(settings, event, reason, "tester", proof, dsn=pg_dsn)
    assert (result.decision.outcome, result.state.row) == (outcome, after)
    on_disk = read_state(settings.serving_file)
    after_state, retired = split_row(after)
    assert on_disk == result.state and on_disk.backend == BACKEND_OF[after_state]
    assert str(on_disk.target) == serves_after(state, event, evidence, after)
    rows = [h for h in history(pg_dsn, limit=500) if h["reason"].endswith(reason)]
    if outcome == CHANGED:
        assert on_disk.reason.endswith(reason) and (on_disk.actor, on_disk.event) == (
            "tester", event,
        )  # fmt: skip
        if event in (*WINDOW_EVENTS, UNRETIRE):  # the reason says what the window did
            assert on_disk.reason == f"{result.decision.message}: {reason}"
        keeps_report = event in (ROLLBACK, RETIRE, UNRETIRE) or event in WINDOW_EVENTS
        expected_report = setup_state(state).report_id if keeps_report else proof.report_id
        assert on_disk.report_id == expected_report
        assert on_disk.failing == FAILING.get((state, evidence), {})
        if event == RETIRE:  # since now, on the report the soak was judged with
            retirement = on_disk.reference_retired
            assert (retirement.report_id, retirement.reference_p95_ms) == ("r-soak", 21.5)
            assert retirement.since == on_disk.changed_at
            expected_report = proof.report_id  # the history row names it
        elif retired:  # every other change keeps the retirement as it was
            assert on_disk.retired == setup_state(state).retired
        previous = str(on_disk.previous) if on_disk.previous else None
        assert [(r["backend"], r["state"], r["event"], r["report_id"], r["generation"],
                 r["previous"], r["retired"]) for r in rows] == [
            (on_disk.backend, after_state, event, expected_report, on_disk.target.generation,
             previous, "chroma" if retired else None)
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
        ('{"backend": "pgvector", "retired": ["chroma"]}', "must map a store"),
        ('{"backend": "pgvector", "retired": {"qdrant": {"since": "x"}}}', "can be retired"),
        ('{"backend": "pgvector", "retired": {"chroma": {}}}', "must record since when"),
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


def test_a_broken_switch_that_records_a_retired_chroma_refuses_a_rollback_onto_it(settings):
    """A rollback over an unreadable file assumes Chroma; not when the file says it is retired."""
    settings.serving_file.parent.mkdir(parents=True)
    content = ('{"backend": "chroma", "state": "chroma", '
               '"retired": {"chroma": {"since": "2026-02-20T00:00:00+00:00"}}}')  # fmt: skip
    settings.serving_file.write_text(content)
    with pytest.raises(ValueError, match="recorded as retired"):
        read_state(settings.serving_file)
    outcome = transition(settings, ROLLBACK, "switch file was broken", "tester")
    assert outcome.decision.outcome == REFUSED
    assert 'candlefire unretire chroma --reason "..."' in outcome.decision.message
    assert settings.serving_file.read_text() == content


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
        # queued on the switch lock, not merely started (a decision that skipped the lock would
        # finish instead, and this fails at once)
        wait_until_blocked(_lock_file(settings), worker.is_alive)
        _write(settings, setup_state(PINNED))  # what a rollback holding the lock writes
    worker.join(timeout=120)  # a bound on waiting, not a performance assertion
    assert results["auto"].decision.outcome == REFUSED
    assert read_state(settings.serving_file).state == PINNED
