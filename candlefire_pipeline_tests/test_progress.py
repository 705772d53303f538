"""ProgressMeter: steady-interval reports with done / total, rate and ETA."""

import pytest

from candlefire_pipeline.progress import ProgressFigures, ProgressMeter, describe


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _meter(total: int, interval_s: float = 10.0):
    clock, messages = FakeClock(), []
    meter = ProgressMeter(
        "pgvector load", total, messages.append, interval_s=interval_s, clock=clock
    )
    return meter, clock, messages


def test_reports_first_update_then_at_most_once_per_interval_then_the_end():
    meter, clock, messages = _meter(25_000)
    for step in range(1, 26):  # 1,000 rows per second for 25 s, an update every second
        clock.now += 1.0
        meter.update(step * 1_000)
    figures = meter.finish()
    assert [m.split(" rows ")[0] for m in messages] == [
        "pgvector load: 1000/25000",  # t=1 s: the first update always reports
        "pgvector load: 11000/25000",  # t=11 s
        "pgvector load: 21000/25000",  # t=21 s
        "pgvector load: 25000/25000",  # t=25 s: finish() says the end
    ]
    assert messages[0] == "pgvector load: 1000/25000 rows (4%), 1000 rows/s, ETA 24 s"
    assert (figures.done, figures.total, round(figures.rate)) == (25_000, 25_000, 1_000)


def test_finish_does_not_repeat_a_report_that_already_said_the_end():
    meter, clock, messages = _meter(5)
    clock.now += 2.0
    meter.update(5)
    meter.finish()
    assert messages == ["pgvector load: 5/5 rows (100%), 2 rows/s, ETA 0 s"]


def test_counts_never_go_backwards_or_past_the_total():
    meter, clock, _ = _meter(100)
    meter.update(80)
    meter.update(20)
    assert meter.done == 80
    meter.update(10**9)
    assert meter.done == 100


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        (ProgressFigures(0, 0, 0.0), "x: 0/0 rows (100%), 0 rows/s, ETA 0 s"),  # vacuous load
        (ProgressFigures(0, 50, 3.0), "x: 0/50 rows (0%), 0 rows/s, ETA unknown"),  # no rate yet
        (ProgressFigures(25, 100, 5.0), "x: 25/100 rows (25%), 5 rows/s, ETA 15 s"),
    ],
)
def test_describe(figures, expected):
    assert describe("x", "rows", figures) == expected


def test_a_negative_total_is_refused():
    with pytest.raises(ValueError, match="total must be >= 0"):
        ProgressMeter("x", -1, print)
