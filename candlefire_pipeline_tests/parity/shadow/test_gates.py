"""Live evidence: a window of shadow comparisons aggregated per pair, and the shadow gates in the
one evaluation (not required = an honest pass; required = never a vacuous pass)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from candlefire_pipeline.operations.shadow.records import ShadowRecord
from candlefire_pipeline.parity.gates import GATES, evaluate_gates, failed
from candlefire_pipeline.parity.shadow.gates import SHADOW_GATES, shadow_gates
from candlefire_pipeline.parity.shadow.window import ShadowWindow, aggregate
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.parity.test_gates import CURRENT, LEDGER, synthetic

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def record(i: int, overlap=1.0, grounding=True, error=None, served="chroma", target="pgvector",
           served_ms=10.0, shadow_ms=20.0, divergences=()) -> ShadowRecord:  # fmt: skip
    failed_read = error is not None
    return ShadowRecord(
        record_id=f"r{i}", recorded_at=(NOW - timedelta(minutes=1, seconds=i)).isoformat(),
        query_hash=f"{i:064x}", served_store=served, shadow_store=target, served_ms=served_ms,
        shadow_ms=None if failed_read else shadow_ms, overlap=None if failed_read else overlap,
        grounding_equal=None if failed_read else grounding,
        keyword_equal=None if failed_read else True, error=error,
        divergences=list(divergences),
    )  # fmt: skip


def window(records, minutes=60, until=NOW) -> ShadowWindow:
    return aggregate(records, until - timedelta(minutes=minutes), until, minutes)


def test_a_window_aggregates_each_pair_over_its_successful_comparisons():
    missing = [{"kind": "missing_chunk", "field": "top15", "pmid": "7"}]
    rows = [record(i, overlap=0.8 if i == 3 else 1.0, divergences=missing if i == 3 else ())
            for i in range(10)]  # fmt: skip
    rows += [record(10, error="BackendUnavailableError: down"), record(11, grounding=False)]
    rows += [record(20 + i, served="pgvector", target="chroma", served_ms=5.0, shadow_ms=50.0)
             for i in range(4)]  # fmt: skip
    found = window(rows)
    pair = found.target("chroma", "pgvector")
    assert (pair.samples, pair.compared, pair.errors) == (12, 11, 1)
    assert pair.mean_overlap == pytest.approx((10 * 1.0 + 0.8) / 11)
    assert pair.min_overlap == 0.8 and pair.grounding_agreement == pytest.approx(10 / 11)
    assert pair.error_rate == pytest.approx(1 / 12)
    assert pair.divergences_by_kind == {"missing_chunk": 1}
    assert [w["overlap"] for w in pair.worst] == [0.8, 1.0]  # worst first; grounding miss next
    assert pair.worst[0]["causes"] == ["missing_chunk"]
    assert pair.worst[0]["query"].startswith("sha256:")  # no text kept
    reverse = found.target("pgvector", "chroma")
    assert reverse.p95_ratio == pytest.approx(10.0) and found.between("pgvector", "chroma") is pair
    again = ShadowWindow.from_dict(__import__("json").loads(found.to_json()))
    assert again.target("chroma", "pgvector").worst == pair.worst


def test_a_busy_window_keeps_its_figures_exact_and_its_plot_values_bounded(monkeypatch):
    from candlefire_pipeline.parity.shadow import window as shadow_window

    monkeypatch.setattr(shadow_window, "PLOT_VALUES", 10)
    rows = [record(i, overlap=0.5 if i == 33 else 1.0, served_ms=float(i)) for i in range(100)]
    pair = window(rows).target("chroma", "pgvector")
    assert pair.compared == 100 and pair.min_overlap == 0.5  # every comparison counts
    assert pair.served_p95_ms == pytest.approx(94.05)
    assert len(pair.overlaps) == len(pair.served_ms) == len(pair.shadow_ms) == 10


def test_an_empty_window_has_no_figures():
    found = window([])
    assert found.targets == [] and found.between("chroma", "pgvector") is None


def _gates(win, **thresholds) -> dict:
    gates = shadow_gates(win, ParityThresholds(**thresholds), "chroma", "pgvector", NOW)
    return {g.name: g for g in gates}


AGREEING = [record(i) for i in range(25)]


@pytest.mark.parametrize(
    "records, thresholds, expected, words",
    [
        # not required: no evidence, too little, or enough and agreeing all pass, and say why
        (None, {}, set(), "not required"),
        ([], {}, set(), "holds no chroma/pgvector"),
        (AGREEING[:5], {}, set(), "too few to judge (5 < 20)"),
        (AGREEING, {}, set(), "over 25 comparisons"),
        # not required, but enough comparisons that disagree: that is evidence, it fails
        ([record(i, overlap=0.5) for i in range(25)], {}, {"shadow_agreement"}, "0.500 < 0.9"),
        ([record(i, grounding=i > 0) for i in range(25)], {}, {"shadow_agreement"}, "grounding"),
        (
            [record(i, error="x" if i < 2 else None) for i in range(25)],
            {},
            {"shadow_errors"},
            "2 of 25 shadow reads failed",
        ),  # fmt: skip
        # required: fewer comparisons, none, or no window at all fail, never a vacuous pass
        (AGREEING, {"min_shadow_queries": 30}, set(SHADOW_GATES), "too few to judge (25 < 30)"),
        ([], {"min_shadow_queries": 1}, set(SHADOW_GATES), "holds no chroma/pgvector"),
        (None, {"min_shadow_queries": 1}, set(SHADOW_GATES), "no shadow window yet"),
        (AGREEING, {"min_shadow_queries": 25}, set(), "25 live comparisons"),
        # every read failed: nothing to compare, and the error gate fails
        ([record(i, error="down") for i in range(25)], {}, {"shadow_errors"}, "25 of 25"),
    ],
)
def test_shadow_gates(records, thresholds, expected, words):
    gates = _gates(None if records is None else window(records), **thresholds)
    assert {name for name, g in gates.items() if not g.passed} == expected, gates
    assert any(words in g.detail for g in gates.values()), gates


def test_a_stale_window_is_no_evidence():
    old = window(AGREEING, minutes=60, until=NOW - timedelta(hours=3))
    gates = _gates(old, min_shadow_queries=10)
    assert not gates["shadow_queries"].passed and "is stale" in gates["shadow_queries"].detail
    assert _gates(window(AGREEING, until=NOW - timedelta(minutes=90)), min_shadow_queries=10)[
        "shadow_queries"
    ].passed  # within two window lengths


def test_the_one_evaluation_includes_the_live_gates_in_order():
    thresholds = ParityThresholds(min_shadow_queries=10)
    gates = evaluate_gates(synthetic(), thresholds, LEDGER, CURRENT, window(AGREEING), NOW)
    assert [g.name for g in gates] == list(GATES) and list(GATES)[-3:] == list(SHADOW_GATES)
    assert failed(gates) == []
    no_window = evaluate_gates(synthetic(), thresholds, LEDGER, CURRENT, None, NOW)
    assert failed(no_window) == list(SHADOW_GATES)
