"""ProgressTracker: a line per interval (never per batch), a final line, rate and ETA."""

from __future__ import annotations

import pytest

from candlefire_pipeline.embedding import Progress, ProgressTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tracker(total: int, interval: float = 10.0) -> tuple[ProgressTracker, list[str], Clock]:
    lines: list[str] = []
    clock = Clock()
    return ProgressTracker("embeddings", total, lines.append, interval, clock), lines, clock


def test_reports_at_the_interval_not_per_batch():
    progress, lines, clock = tracker(total=10_000)
    for _ in range(9):  # nine batches in 9 s: no line yet
        clock.now += 1
        progress.advance(1000, reused=100)
    assert lines == []
    clock.now += 1
    progress.advance(500)
    assert lines == ["embeddings: 9,500/10,000 (95%), 900 cached, 950/s, ETA 1s"]
    clock.now += 5
    progress.advance(100)  # 5 s after the last line: quiet again
    assert len(lines) == 1


def test_the_final_line_always_comes_and_carries_the_figures():
    progress, lines, clock = tracker(total=3000)
    clock.now += 2
    progress.advance(3000, reused=1000)
    final = progress.finish()
    assert lines == ["embeddings: 3,000/3,000 (100%), 1,000 cached, 1,500/s, done in 2s"]
    assert (final.done, final.total, final.reused, final.seconds, final.rate) == (
        3000, 3000, 1000, 2.0, 1500.0,
    )  # fmt: skip
    assert final.final and final.eta_seconds == 0.0
    assert progress.reports == 1


def test_an_empty_stage_reports_once():
    progress, lines, _ = tracker(total=0)
    final = progress.finish()
    assert lines == ["embeddings: 0/0, 0 cached, 0/s, done in 0s"]
    assert final.rate == 0.0


@pytest.mark.parametrize(
    ("done", "total", "seconds", "eta"),
    [(0, 100, 5.0, None), (50, 100, 5.0, 5.0), (100, 100, 5.0, 0.0), (10, 100, 0.0, None)],
)
def test_eta_is_the_remaining_rows_at_the_rate_so_far(done, total, seconds, eta):
    assert Progress("x", done, total, 0, seconds).eta_seconds == eta


@pytest.mark.parametrize(
    ("seconds", "text"), [(59.4, "59s"), (61, "1m01s"), (3600 * 2 + 120, "2h02m")]
)
def test_durations_read_well(seconds, text):
    reading = Progress("x", 10, 10, 0, seconds, final=True)
    assert reading.message().endswith(f"done in {text}")


def test_an_unknown_eta_says_so():
    assert Progress("x", 0, 10, 0, 3.0).message().endswith("ETA unknown")


@pytest.mark.parametrize("interval", [0, -1])
def test_the_interval_must_be_positive(interval):
    with pytest.raises(ValueError, match="interval"):
        ProgressTracker("x", 1, None, interval)


def test_without_a_callback_the_tracker_still_counts():
    progress = ProgressTracker("x", 5, None, 10.0, Clock())
    progress.advance(5)
    assert progress.finish().done == 5
