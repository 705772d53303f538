"""A promoted deployment watches itself: the operator's sequences through watch() and the real
switch file and Postgres history -- degraded then rollback then the next scheduled run; degraded
then recovered; the auto-rollback's pin against the schedule."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    CHANGED,
    PROMOTE,
    REFUSED,
    ROLLBACK,
    UNCHANGED,
    transition,
)
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    Evidence,
    ServingState,
    Target,
    read_state,
)
from candlefire_pipeline.operations.serving.watch import (
    REPORT_SOURCE,
    SHADOW_SOURCE,
    judge,
    watch,
)
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings, WatchSettings

ACTOR = "dagster:shadow_parity"
PASSING = tuple(GateResult(n, True, 1.0, 1.0, "ok") for n in GATES)


def _gates(**failing: str) -> list[GateResult]:
    """Every gate passing except the named ones (name=detail)."""
    names = [*GATES, *(n for n in failing if n not in GATES)]
    return [GateResult(n, n not in failing, 0.5, 0.9, failing.get(n, "ok")) for n in names]


def _report(report_id: str, started_at: str) -> Evidence:
    return Evidence(report_id, started_at, PASSING)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops")


def _promote(settings: Settings, pg_dsn: str) -> None:
    evidence = _report("r-1", "2026-01-01T00:00:00+00:00")
    outcome = transition(settings, PROMOTE, "go live", "oncall", evidence, dsn=pg_dsn)
    assert outcome.state.state == PROMOTED


def _window(source: str, window_id: str, **failing: str):
    return judge(source, window_id, _gates(**failing))


def test_judge_watches_each_source_on_its_own_gates():
    stale_only = judge(REPORT_SOURCE, "r", _gates(report_is_fresh="a batch landed"))
    assert stale_only.failed == ()  # a batch during the run says nothing about agreement
    bad = judge(REPORT_SOURCE, "r", _gates(mean_overlap="0.41 < 0.9", report_is_fresh="x"))
    assert bad.failed == ("mean_overlap",) and "mean_overlap: 0.41 < 0.9" in bad.detail
    live = _gates(shadow_agreement="0.4", shadow_errors="chroma down", shadow_queries="3 < 50")
    assert judge(REPORT_SOURCE, "r", live).failed == ()  # the shadow source's own business
    # a failing shadow target (the rollback target) does not degrade the store that serves
    assert judge(SHADOW_SOURCE, "w", live).failed == ("shadow_agreement",)


def test_nothing_is_watched_unless_pgvector_serves(settings, pg_dsn):
    failing = _window(SHADOW_SOURCE, "w1", shadow_agreement="low")
    result = watch(settings, failing, ACTOR, pg_dsn)
    assert result.outcome is None and "never promoted" in result.message
    assert read_state(settings.serving_file).state == INITIAL
    transition(settings, ROLLBACK, "pin", "oncall", dsn=pg_dsn)
    assert watch(settings, failing, ACTOR, pg_dsn).outcome is None
    assert read_state(settings.serving_file).state == PINNED
    assert watch(settings, None, ACTOR, pg_dsn).outcome is None  # nothing conclusive


def test_degraded_then_rollback_then_the_next_scheduled_run(settings, pg_dsn, caplog):
    _promote(settings, pg_dsn)
    with caplog.at_level(logging.ERROR):
        failing = _window(SHADOW_SOURCE, "w1", shadow_agreement="0.41")
        result = watch(settings, failing, ACTOR, pg_dsn)
    degraded = read_state(settings.serving_file)
    assert (degraded.state, degraded.backend, degraded.report_id) == (DEGRADED, "pgvector", "r-1")
    assert degraded.failing == {SHADOW_SOURCE: ["w1"]} and degraded.actor == ACTOR
    assert result.level == logging.ERROR and "SERVING DEGRADED" in caplog.text
    assert "DEGRADED" in degraded.describe() and "shadow_parity: 1 in a row" in degraded.describe()
    # the same window sent again (a re-run) is not counted twice
    again = watch(settings, _window(SHADOW_SOURCE, "w1", shadow_agreement="0.41"), ACTOR, pg_dsn)
    assert again.outcome.decision.outcome == UNCHANGED
    assert read_state(settings.serving_file) == degraded

    transition(settings, ROLLBACK, "shadow reads disagree", "oncall", dsn=pg_dsn)
    pinned = read_state(settings.serving_file)
    assert (pinned.state, pinned.failing, pinned.report_id) == (PINNED, {}, "r-1")
    nightly = _report("r-2", "2026-06-01T00:00:00+00:00")  # passes every gate
    scheduled = transition(settings, AUTO_PROMOTE, "nightly", "dagster", nightly, dsn=pg_dsn)
    assert (
        scheduled.decision.outcome == REFUSED and "candlefire promote" in scheduled.decision.message
    )
    assert watch(settings, _window(SHADOW_SOURCE, "w2"), ACTOR, pg_dsn).outcome is None
    assert read_state(settings.serving_file) == pinned
    rows = history(pg_dsn)
    assert [(r["state"], r["event"]) for r in rows[:3]] == [
        (PINNED, "rollback"), (DEGRADED, "window_failed"), (PROMOTED, "promote"),
    ]  # fmt: skip
    assert rows[1]["reason"].startswith("degraded: a shadow_parity window failed")


def test_degraded_then_recovered(settings, pg_dsn):
    _promote(settings, pg_dsn)
    watch(settings, _window(SHADOW_SOURCE, "w1", shadow_agreement="0.4"), ACTOR, pg_dsn)
    watch(settings, _window(REPORT_SOURCE, "r-2", ann_recall="0.7"), "dagster:parity_report",
          pg_dsn)  # fmt: skip
    both = read_state(settings.serving_file)
    assert both.state == DEGRADED and set(both.failing) == {SHADOW_SOURCE, REPORT_SOURCE}
    # a passing shadow window clears the shadow source only: the report still fails
    partial = watch(settings, _window(SHADOW_SOURCE, "w2"), ACTOR, pg_dsn)
    assert partial.outcome.state.failing == {REPORT_SOURCE: ["r-2"]}
    assert partial.outcome.state.state == DEGRADED
    recovered = watch(settings, _window(REPORT_SOURCE, "r-3"), "dagster:parity_report", pg_dsn)
    state = read_state(settings.serving_file)
    assert (state.state, state.failing, state.report_id) == (PROMOTED, {}, "r-1")
    assert recovered.level == logging.WARNING and "recovered" in recovered.message
    healthy = watch(settings, _window(SHADOW_SOURCE, "w3"), ACTOR, pg_dsn)
    assert healthy.outcome.decision.outcome == UNCHANGED


def test_the_auto_rollback_pin_holds_against_the_schedule(settings, pg_dsn, caplog):
    auto = replace(settings, watch=WatchSettings(auto_rollback=True, rollback_windows=3))
    _promote(auto, pg_dsn)
    for window_id in ("w1", "w2"):
        watch(auto, _window(SHADOW_SOURCE, window_id, shadow_agreement="0.4"), ACTOR, pg_dsn)
    assert read_state(auto.serving_file).state == DEGRADED
    # a passing window in between resets the count: failures must be consecutive
    watch(auto, _window(SHADOW_SOURCE, "w3"), ACTOR, pg_dsn)
    for window_id in ("w4", "w5"):
        watch(auto, _window(SHADOW_SOURCE, window_id, shadow_agreement="0.4"), ACTOR, pg_dsn)
    assert read_state(auto.serving_file).failing == {SHADOW_SOURCE: ["w4", "w5"]}
    with caplog.at_level(logging.ERROR):
        third = watch(auto, _window(SHADOW_SOURCE, "w6", shadow_agreement="0.4"), ACTOR, pg_dsn)
    pin = read_state(auto.serving_file)
    assert (pin.state, pin.backend, pin.actor, pin.failing) == (PINNED, "chroma", ACTOR, {})
    assert pin.reason.startswith("auto-rollback after 3 failing shadow_parity windows")
    assert third.level == logging.ERROR and "AUTO-ROLLBACK" in caplog.text

    nightly = _report("r-2", "2099-01-01T00:00:00+00:00")  # newer than the pin, passing
    for _ in range(2):  # the schedule, then a re-run: the pin holds
        run = transition(auto, AUTO_PROMOTE, "nightly", "dagster", nightly, dsn=pg_dsn)
        assert run.decision.outcome == REFUSED
    assert watch(auto, _window(SHADOW_SOURCE, "w7"), ACTOR, pg_dsn).outcome is None
    assert read_state(auto.serving_file) == pin
    old = _report("r-old", "2000-01-01T00:00:00+00:00")
    assert transition(auto, PROMOTE, "retry", "oncall", old, dsn=pg_dsn).decision.outcome == (
        REFUSED
    )
    back = transition(auto, PROMOTE, "fixed the index", "oncall", nightly, dsn=pg_dsn)
    assert back.decision.outcome == CHANGED and back.state.state == PROMOTED
    assert back.state.failing == {}


def test_an_operator_promote_re_arms_a_degraded_deployment(settings, pg_dsn):
    auto = replace(settings, watch=WatchSettings(auto_rollback=True, rollback_windows=2))
    _promote(auto, pg_dsn)
    watch(auto, _window(SHADOW_SOURCE, "w1", shadow_agreement="0.4"), ACTOR, pg_dsn)
    evidence = _report("r-2", "2026-02-01T00:00:00+00:00")
    rearmed = transition(auto, PROMOTE, "looked, acceptable", "oncall", evidence, dsn=pg_dsn)
    assert (rearmed.state.state, rearmed.state.failing) == (PROMOTED, {})
    watch(auto, _window(SHADOW_SOURCE, "w2", shadow_agreement="0.4"), ACTOR, pg_dsn)
    assert read_state(auto.serving_file).state == DEGRADED  # 1 of 2 again, not 2 of 2


@pytest.mark.parametrize(
    "value, error",
    [(0, "between 1 and 100"), (101, "between 1 and 100"), (True, "between 1 and 100")],
)
def test_the_rollback_window_count_is_validated(value, error):
    with pytest.raises(ValueError, match=f"CANDLEFIRE_AUTO_ROLLBACK_WINDOWS must be {error}"):
        WatchSettings(auto_rollback=True, rollback_windows=value)


def test_the_watch_policy_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK", "on")
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK_WINDOWS", "5")
    assert Settings.from_env().watch.rollback_after == 5
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK", "off")
    assert Settings.from_env().watch.rollback_after is None
    monkeypatch.setenv("CANDLEFIRE_AUTO_ROLLBACK", "sometimes")
    with pytest.raises(ValueError, match="CANDLEFIRE_AUTO_ROLLBACK must be true or false"):
        Settings.from_env()
    assert Settings.from_env(parity=False).watch.rollback_after is None  # rollback still works


def test_a_window_changes_the_switch_only_for_the_generation_it_judged(settings, pg_dsn):
    """The parity report and the shadow reads judge the default generation: while another one
    serves, only that generation's own comparisons are watched; a pin is never watched."""
    failing = _window(SHADOW_SOURCE, "w1", shadow_agreement="low")
    gen_a = ServingState(PROMOTED, "2026-01-01T00:00:00+00:00", "c-1", "set up", "oncall",
                         "promote_generation", generation="gen_a",
                         previous=Target("pgvector", "default"))  # fmt: skip
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text(gen_a.to_json())
    result = watch(settings, failing, ACTOR, pg_dsn)
    assert result.outcome is None and "judges generation default" in result.message
    assert read_state(settings.serving_file) == gen_a
    own = _window(REPORT_SOURCE, "c-2", ann_recall="0.80 < 0.95")
    assert watch(settings, own, "dagster:gen_b/parity_report", pg_dsn, "gen_b").outcome is None
    result = watch(settings, own, "dagster:gen_a/parity_report", pg_dsn, "gen_a")
    degraded = read_state(settings.serving_file)
    assert result.outcome is not None and "SERVING DEGRADED" in result.message
    assert (degraded.state, degraded.target) == (DEGRADED, Target("pgvector", "gen_a"))
    assert degraded.failing == {REPORT_SOURCE: ["c-2"]}
    transition(settings, ROLLBACK, "back to pgvector/default", "oncall", dsn=pg_dsn)
    assert read_state(settings.serving_file).target == Target("pgvector", "default")
    assert read_state(settings.serving_file).state == PINNED_PGVECTOR
    assert watch(settings, failing, ACTOR, pg_dsn).outcome is None  # a pin is not watched
    assert read_state(settings.serving_file).state == PINNED_PGVECTOR
