"""The soak a retirement waits for: read from the switch history (pure, then on the real
history table through `retire`), and its setting range-checked like a gate threshold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from candlefire_pipeline.operations.retirement.commands import retire
from candlefire_pipeline.operations.retirement.soak import failed_windows, serving_since
from candlefire_pipeline.operations.serving.commands import Order
from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    REFUSED,
    WINDOW_FAILED,
    WINDOW_PASSED,
    transition,
)
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    PINNED,
    PROMOTED,
    Evidence,
    ServingState,
    Window,
)
from candlefire_pipeline.settings import Settings, WatchSettings
from candlefire_pipeline_tests.operations.serving.states import PASSING

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def row(days: float, state=PROMOTED, event=AUTO_PROMOTE, generation="default", reason="r"):
    backend = "chroma" if state == PINNED else "pgvector"
    return {"changed_at": ago(days), "state": state, "event": event, "backend": backend,
            "generation": generation, "reason": reason}  # fmt: skip


SERVING = ServingState(PROMOTED, ago(1).isoformat(), "r1", "set up", "tester", "setup")


@pytest.mark.parametrize(
    "rows, state, since",
    [
        ([], SERVING, ago(1)),  # no history: the switch's own last change, a conservative start
        ([row(1, event=WINDOW_PASSED), row(4, DEGRADED, WINDOW_FAILED), row(10),
          row(12, PINNED, "rollback"), row(20)], SERVING, ago(10)),
        ([row(1, event="retire"), row(20)], SERVING, ago(20)),  # a retirement is no break
        ([row(3, event="promote_generation"), row(8, generation="gen_a"), row(30)], SERVING,
         ago(3)),
        ([row(2, generation="gen_a")], replace(SERVING, generation="gen_a"), None),
        ([row(2)], replace(SERVING, state=DEGRADED), ago(2)),  # degraded still serves
        ([row(2, PINNED, "rollback")], ServingState(PINNED), None),
        ([row(2, "pgvector_pinned", "rollback")], replace(SERVING, state="pgvector_pinned"),
         None),
    ],
)  # fmt: skip
def test_serving_since_is_the_start_of_the_unbroken_run_of_default_pgvector(rows, state, since):
    found = serving_since(rows, state)
    assert found == (since.isoformat() if since else None)


def test_failed_windows_are_the_failing_windows_inside_the_soak():
    rows = [row(1, event=WINDOW_PASSED), row(3, DEGRADED, WINDOW_FAILED, reason="w3 fails"),
            row(20, DEGRADED, WINDOW_FAILED, reason="w20 fails"), row(30)]  # fmt: skip
    assert [(w.at, w.what) for w in failed_windows(rows, ago(14))] == [
        (ago(3).isoformat(), "w3 fails")
    ]


@pytest.mark.parametrize(
    "value",
    [0, 0.99, 365.5, float("nan"), True, -14],
)
def test_the_soak_is_range_checked_like_a_gate_threshold(value):
    with pytest.raises(ValueError, match="CANDLEFIRE_RETIRE_SOAK_DAYS .* between 1 and 365 days"):
        WatchSettings(retire_soak_days=value)


def test_the_soak_comes_from_the_environment(monkeypatch):
    assert Settings.from_env().watch.retire_soak_days == 14.0
    for ok in ("1", "365", "2.5"):
        monkeypatch.setenv("CANDLEFIRE_RETIRE_SOAK_DAYS", ok)
        assert Settings.from_env().watch.retire_soak_days == float(ok)
    monkeypatch.setenv("CANDLEFIRE_RETIRE_SOAK_DAYS", "two weeks")
    with pytest.raises(ValueError, match="CANDLEFIRE_RETIRE_SOAK_DAYS must be a number"):
        Settings.from_env()
    monkeypatch.setenv("CANDLEFIRE_RETIRE_SOAK_DAYS", "0")
    with pytest.raises(ValueError, match="between 1 and 365"):
        Settings.from_env()


# the real history table ----------------------------------------------------------------------
@pytest.fixture
def promoted(tmp_path, fresh_pg_dsn) -> Settings:
    """pgvector promoted (the history in a database of its own), a one-day soak, no report."""
    settings = Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops",
                        pg_dsn=fresh_pg_dsn, watch=WatchSettings(retire_soak_days=1))  # fmt: skip
    passing = Evidence("r-1", datetime.now(UTC).isoformat(), PASSING)
    assert transition(settings, AUTO_PROMOTE, "promote", "t", passing, fresh_pg_dsn).state.state
    return settings


def _refusal(settings: Settings, now: datetime) -> str:
    outcome = retire(settings, "chroma", Order("retire", "retire it", "tester"), now=now).outcome
    assert outcome.decision.outcome == REFUSED and outcome.state.retired == {}
    return outcome.decision.message


def _backdate(dsn: str, event: str, days: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE serving_backend_history SET changed_at = changed_at - make_interval("
            "days => %s) WHERE event = %s", (days, event),
        )  # fmt: skip


def test_retire_reads_the_soak_from_the_history_table(promoted):
    later = datetime.now(UTC) + timedelta(days=2)
    # soaked: only the missing report is left to say
    assert _refusal(promoted, later) == (
        "no parity report yet: run parity_report (or `candlefire promote --run-report`)"
    )
    assert "(0.5 of the 1-day soak): retire after" in _refusal(
        promoted, datetime.now(UTC) + timedelta(hours=12)
    )
    window = Window("shadow_parity", "w7", ("shadow_agreement",), "mean overlap 0.41 < 0.9")
    transition(promoted, WINDOW_FAILED, "w7", "dagster", Evidence(window=window),
               promoted.pg_dsn)  # fmt: skip
    assert "degraded since" in _refusal(promoted, later)
    passed = Evidence(window=Window("shadow_parity", "w8"))
    assert transition(promoted, WINDOW_PASSED, "w8", "dagster", passed, promoted.pg_dsn)
    _backdate(promoted.pg_dsn, AUTO_PROMOTE, 3)  # served 3 days; the failing window is today
    said = _refusal(promoted, datetime.now(UTC))
    assert "1 watched window(s) failed inside the 1-day soak" in said and "w7" in said
    assert "of the 1-day soak" not in said  # served long enough


def test_retire_refuses_when_the_history_cannot_be_read(tmp_path):
    down = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=2"  # nothing listens on 9
    settings = Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops", pg_dsn=down)
    said = _refusal(settings, NOW)
    assert said.startswith("the switch history cannot be read, so the soak cannot be proven")
    assert not settings.serving_file.exists()
