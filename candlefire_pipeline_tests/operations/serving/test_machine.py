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
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    Evidence,
    ServingState,
)
from candlefire_pipeline_tests.operations.serving.expected import (
    EXPECTED,
)
from candlefire_pipeline_tests.operations.serving.states import (
    STATES,
    evidence_for,
    setup_state,
)


def test_the_table_lists_every_state_and_event_and_the_test_covers_every_pair():
    states = {INITIAL, PROMOTED, DEGRADED, PINNED, PINNED_PGVECTOR}
    events = set(serving.EVENTS)
    assert set(BACKEND_OF) == states
    assert set(serving.TRANSITIONS) == {(s, e) for s in states for e in events}
    assert {(STATES[s].state, e) for s, e, *_ in EXPECTED} == set(serving.TRANSITIONS)


@pytest.mark.parametrize("state, event, evidence, outcome, after, words", EXPECTED)
def test_decide(state, event, evidence, outcome, after, words):
    decision = decide(setup_state(state), event, evidence_for(evidence, setup_state(state)))
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
