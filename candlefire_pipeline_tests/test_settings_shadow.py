"""Shadow-read settings: off by default, every value validated where the environment is read."""

from __future__ import annotations

import pytest

from candlefire_pipeline.settings import Settings, ShadowSettings


def test_shadow_reads_are_off_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    shadow = Settings.from_env().shadow
    assert shadow == ShadowSettings() and not shadow.enabled and shadow.keep_text is False


def test_the_environment_sets_every_field(monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    for variable, value in {
        "CANDLEFIRE_SHADOW_RATE": "0.25", "CANDLEFIRE_SHADOW_KEEP_TEXT": "on",
        "CANDLEFIRE_SHADOW_QUEUE": "8", "CANDLEFIRE_SHADOW_WINDOW_MINUTES": "30",
        "CANDLEFIRE_SHADOW_CRON": "*/5 * * * *", "CANDLEFIRE_SHADOW_RETENTION_DAYS": "3",
        "CANDLEFIRE_SHADOW_PRIORITY": "Nice",
    }.items():  # fmt: skip
        monkeypatch.setenv(variable, value)
    assert Settings.from_env().shadow == ShadowSettings(0.25, True, 8, 30, "*/5 * * * *", 3, "nice")


@pytest.mark.parametrize(
    "variable, value, error",
    [
        ("CANDLEFIRE_SHADOW_RATE", "-0.1", "between 0 and 1"),
        ("CANDLEFIRE_SHADOW_RATE", "1.5", "between 0 and 1"),
        ("CANDLEFIRE_SHADOW_RATE", "nan", "between 0 and 1"),
        ("CANDLEFIRE_SHADOW_RATE", "half", "must be a number"),
        ("CANDLEFIRE_SHADOW_KEEP_TEXT", "maybe", "true or false"),
        ("CANDLEFIRE_SHADOW_QUEUE", "0", "between 1 and 10000"),
        ("CANDLEFIRE_SHADOW_WINDOW_MINUTES", "1", "between 5 and 10080"),
        ("CANDLEFIRE_SHADOW_RETENTION_DAYS", "0", "between 1 and 3650"),
        ("CANDLEFIRE_SHADOW_PRIORITY", "realtime", "one of idle, nice, normal"),
    ],
)
def test_a_bad_value_names_the_variable(monkeypatch, tmp_path, variable, value, error):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"{variable} must be.*{error}|{variable}.*{error}"):
        Settings.from_env()
    Settings.from_env(parity=False)  # a rollback does not read them
