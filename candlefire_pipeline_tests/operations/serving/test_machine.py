"""The serving state machine's decisions: every (state, event) pair of the table and each guard."""

from __future__ import annotations

import pytest

from candlefire_pipeline.operations.serving import machine as serving
from candlefire_pipeline.operations.serving.machine import (
    WINDOW_EVENTS,
    decide,
)
from candlefire_pipeline.operations.serving.state import (
    BACKEND_OF,
    DEGRADED,
    DEGRADED_RETIRED,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PINNED_PGVECTOR_RETIRED,
    PROMOTED,
    PROMOTED_RETIRED,
    ROWS,
    Evidence,
    ServingState,
)
from candlefire_pipeline.operations.serving.table import RETIRE
from candlefire_pipeline_tests.operations.serving.expected import EXPECTED
from candlefire_pipeline_tests.operations.serving.expected_retired import EXPECTED_RETIRED
from candlefire_pipeline_tests.operations.serving.states import (
    STATES,
    evidence_for,
    setup_state,
)


def test_the_table_lists_every_row_and_event_and_the_test_covers_every_pair():
    states = {INITIAL, PROMOTED, DEGRADED, PINNED, PINNED_PGVECTOR}
    retired = {PROMOTED_RETIRED, DEGRADED_RETIRED, PINNED_PGVECTOR_RETIRED}
    events = set(serving.EVENTS)
    assert set(BACKEND_OF) == states and set(ROWS) == states | retired
    assert set(serving.TRANSITIONS) == {(s, e) for s in states | retired for e in events}
    walked = {(STATES[s].row, e) for s, e, *_ in EXPECTED + EXPECTED_RETIRED}
    assert walked == set(serving.TRANSITIONS)


@pytest.mark.parametrize("state, event, evidence, outcome, after, words",
                         EXPECTED + EXPECTED_RETIRED)  # fmt: skip
def test_decide(state, event, evidence, outcome, after, words):
    decision = decide(setup_state(state), event, evidence_for(evidence, setup_state(state)))
    assert (decision.outcome, decision.target, decision.source) == (
        outcome, after, STATES[state].row,
    )  # fmt: skip
    assert words in decision.message


def test_a_refused_retirement_names_every_unmet_condition_and_since_when():
    decision = decide(STATES[PROMOTED], RETIRE, evidence_for("every condition unmet", None))
    assert decision.outcome == "refused"
    parts = decision.message.split("; ")
    assert [p.split(" ")[0] for p in parts] == ["pgvector", "1", "report"]
    assert "since 2026-02-26T00:00:00+00:00" in parts[0]  # serving since
    assert "the last at 2026-02-24T00:00:00+00:00" in parts[1]  # the failed window
    assert "fails gates: p95_ratio" in parts[2]


@pytest.mark.parametrize("event", WINDOW_EVENTS)
def test_a_window_event_without_its_window_is_an_error(event):
    with pytest.raises(ValueError, match="needs the window"):
        decide(STATES[DEGRADED], event, Evidence())


def test_unknown_event_is_an_error():
    with pytest.raises(ValueError, match="unknown serving event"):
        decide(ServingState(), "flip")
