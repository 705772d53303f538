"""The app section's figures: the ratio judged against the goal at p50 and p95, calls per
request per kind, and the embedder's time taken out of each request."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from benchmarks.app.report import calls_text, markdown, without_embedding
from benchmarks.app.scaled import Timed


@dataclass
class Arm:
    seconds: list[float]
    embed_seconds: list[float] = field(default_factory=list)
    call_counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.embed_seconds = self.embed_seconds or [0.0] * len(self.seconds)


def _results(pg: float, chroma: float, reader: float, warm_1m: float, cold: tuple,
             per_second: float) -> list[dict]:  # fmt: skip
    """The benchmark's results with every request of an arm taking the same seconds."""
    arms = {name: Arm([seconds] * 20, call_counts={"retrieve": 20}) for name, seconds in
            (("pg", pg), ("chroma", chroma), ("reader", reader))}  # fmt: skip
    for name, arm in arms.items():
        arm.name, arm.embedder_calls, arm.texts = name, 0, 0
    first = {"size": 62_196, "requests": 20, "arms": arms, "verdicts": [],
             "warm": Timed([pg] * 20, {"kept": 90, "sql": 10}), "cold": Timed([cold[0]] * 20),
             "referee": [], "threads": [{"threads": 1, "per_second": per_second / 2},
                                        {"threads": 8, "per_second": per_second}]}  # fmt: skip
    last = {"size": 1_000_000, "warm": Timed([warm_1m] * 20), "cold": Timed([cold[1]] * 20),
            "referee": []}  # fmt: skip
    return [first, last]


@pytest.mark.parametrize(
    ("results", "verdicts", "lines"),
    [
        (_results(0.05, 6.0, 0.04, 0.06, (0.3, 0.9), 12.0),
         ["(goal >= 50x: met)", "(goal <= 2x: met)", "(goal <= 1.5x: met)",
          "(goal <= 4x: met)", "(goal >= 10 with 8: met)"],
         ["app-path 62k: vs Chroma 120.0x p50, 120.0x p95; vs ServingReader 1.25x p95",
          "app-path 1M: warm p95 1.20x of 62k, cold p95 3.00x of 62k",
          "app-path threads: 12.0 requests/s with 8 threads"]),
        (_results(0.2, 6.0, 0.05, 0.4, (0.3, 1.5), 4.0),
         ["(goal >= 50x: NOT met)", "(goal <= 2x: NOT met)", "(goal <= 1.5x: NOT met)",
          "(goal <= 4x: NOT met)", "(goal >= 10 with 8: NOT met)"],
         ["app-path 62k: vs Chroma 30.0x p50, 30.0x p95; vs ServingReader 4.00x p95",
          "app-path 1M: warm p95 2.00x of 62k, cold p95 5.00x of 62k",
          "app-path threads: 4.0 requests/s with 8 threads"]),
    ],
)  # fmt: skip
def test_each_goal_is_judged_and_the_section_ends_with_its_three_lines(results, verdicts, lines):
    text = markdown(results, {"pg_ef_search": 1000}, "load note")
    for verdict in verdicts:
        assert verdict in text
    assert text.splitlines()[-3:] == lines
    assert "90% of 100" in text  # the share of calls answered from kept entries


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
