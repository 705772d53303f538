"""The app section's figures: the ratio judged against the goal at p50 and p95, calls per
request per kind, and the embedder's time taken out of each request."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from benchmarks.app.report import GOAL_RATIO, calls_text, ratio_line, without_embedding


@dataclass
class Arm:
    seconds: list[float]
    embed_seconds: list[float] = field(default_factory=list)
    call_counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.embed_seconds = self.embed_seconds or [0.0] * len(self.seconds)


@pytest.mark.parametrize(
    ("slow", "fast", "met"),
    [
        ([2.0] * 20, [0.2] * 20, "met"),
        ([2.0] * 20, [0.2] * 18 + [1.0] * 2, "NOT met"),  # the p95 ratio falls short
        ([0.5] * 20, [0.2] * 20, "NOT met"),
    ],
)
def test_the_goal_is_met_only_when_both_percentiles_reach_it(slow, fast, met):
    fast = Arm(fast)
    line = ratio_line(Arm(slow), fast, "Chroma / pgvector", GOAL_RATIO)
    assert line.endswith(".") and f"at both: {met})" in line
    assert "goal" not in ratio_line(Arm(slow), fast, "pgvector / reader")


def test_the_embedders_time_is_taken_out_of_each_request():
    arm = Arm([1.0, 2.0], embed_seconds=[0.25, 1.5])
    assert without_embedding(arm) == [0.75, 0.5]


@pytest.mark.parametrize(
    ("counts", "text"),
    [
        ({"count": 4, "query": 250, "get": 110}, "91.0 (count 1.0, query 62.5, get 27.5)"),
        ({"retrieve": 4}, "1 (retrieve)"),
    ],
)
def test_calls_per_request_are_shown_per_kind(counts, text):
    assert calls_text(Arm([1.0] * 4, call_counts=counts), 4) == text
