"""Ranking-agreement and latency statistics, with expected values worked out by hand."""

from __future__ import annotations

import math

import pytest

from candlefire_pipeline.parity import metrics


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([], [], 1.0),
        (["1", "2"], ["1", "2"], 1.0),
        (["1", "2"], ["3"], 0.0),
        (["1", "2", "3"], ["2", "3", "4"], 2 / 4),
        (["1", "1", "2"], ["2"], 1 / 2),  # sets: repeats do not count twice
    ],
)
def test_jaccard(a, b, expected):
    assert metrics.jaccard(a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    "candidate, reference, expected",
    [
        ([], [], 1.0),
        (["1"], [], 1.0),  # nothing to recall
        ([], ["1"], 0.0),
        (["1", "2", "9"], ["1", "2", "3", "4"], 2 / 4),
        (["4", "3", "2", "1"], ["1", "2", "3", "4"], 1.0),  # order does not matter
    ],
)
def test_recall(candidate, reference, expected):
    assert metrics.recall(candidate, reference) == pytest.approx(expected)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([], [], 1.0),
        (["1", "2"], ["2", "1"], 1.0),
        (["1", "2", "3"], ["1"], 1 / 3),  # extra items on one side lower it, unlike recall
        (["1", "2", "3", "4"], ["1", "2", "3", "5"], 3 / 4),
    ],
)
def test_overlap(a, b, expected):
    assert metrics.overlap(a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([], [], 1.0),
        (["a"], [], 0.0),
        (["a", "b", "c"], ["a", "b", "c"], 1.0),
        (["a", "b", "c"], ["x", "y", "z"], 0.0),
        # k=2, X1=0, X2=2: (2/2)p^2 + (1-p)/p * (0*p + (2/2)p^2) = .81 + .09
        (["a", "b"], ["b", "a"], 0.9),
        # a prefix of the other list: extrapolation assumes agreement continues
        (["a", "b", "c"], ["a"], 1.0),
        (["a"], ["a", "b", "c"], 1.0),
        # k=2, X1=1, X2=1: (1/2)p^2 + (1-p)/p * (1*p + (1/2)p^2) = .405 + .1 + .045
        (["a", "b"], ["a", "c"], 0.55),
    ],
)
def test_rbo_ext(a, b, expected):
    assert metrics.rbo(a, b, p=0.9) == pytest.approx(expected)


def test_rbo_rewards_agreement_at_the_top_more_than_at_the_bottom():
    base = [str(i) for i in range(10)]
    swap_top = ["1", "0", *base[2:]]
    swap_bottom = [*base[:8], "9", "8"]
    assert metrics.rbo(base, swap_top) < metrics.rbo(base, swap_bottom) < 1.0


@pytest.mark.parametrize("p", [0.0, 1.0, -0.5, 1.5])
def test_rbo_rejects_a_persistence_outside_0_1(p):
    with pytest.raises(ValueError, match="persistence"):
        metrics.rbo(["a"], ["a"], p=p)


@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([5.0], 95, 5.0),
        ([1.0, 2.0], 50, 1.5),
        ([3.0, 1.0, 2.0], 50, 2.0),  # sorted first
        # 20 values 1..20: position 0.95 * 19 = 18.05 -> 19 + 0.05 * (20 - 19)
        ([float(v) for v in range(1, 21)], 95, 19.05),
        ([float(v) for v in range(1, 21)], 100, 20.0),
        ([float(v) for v in range(1, 21)], 0, 1.0),
    ],
)
def test_percentile_interpolates_linearly(values, q, expected):
    assert metrics.percentile(values, q) == pytest.approx(expected)


def test_p50_p95_and_empty_inputs():
    values = [float(v) for v in range(1, 101)]
    assert metrics.p50(values) == pytest.approx(50.5)
    assert metrics.p95(values) == pytest.approx(95.05)
    assert math.isnan(metrics.p95([])) and math.isnan(metrics.mean([]))
    with pytest.raises(ValueError, match="0..100"):
        metrics.percentile(values, 101)
