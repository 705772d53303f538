"""Every environment variable is in the settings table (docs/OPERATIONS.md); renamed ones keep
working."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from candlefire_pipeline.settings import Settings, executor_mode
from candlefire_pipeline.settings import env as settings_env

REPO_ROOT = Path(__file__).resolve().parents[1]
VARIABLE = re.compile(r"\b(?:CANDLEFIRE|RAY|NCBI)_[A-Z0-9_]+\b")


def variables_read() -> set[str]:
    """Every variable name the package spells as a string (settings/ is the only reader)."""
    names = set()
    for path in (REPO_ROOT / "candlefire_pipeline").rglob("*.py"):
        names |= {m.strip("\"'") for m in re.findall(r"[\"'][A-Z0-9_]+[\"']", path.read_text())}
    return {name for name in names if VARIABLE.fullmatch(name) and not name.endswith("_")}


def documented(manual: str) -> set[str]:
    """Variables of the settings table; `A_B` / `_C` in a row names A_B and A_C (or B's prefix)."""
    table = manual.split("## Settings", 1)[1].split("\n## ", 1)[0]
    found = set()
    for row in table.splitlines():
        names = re.findall(r"`((?:CANDLEFIRE|RAY|NCBI)_[A-Z0-9_]+|_[A-Z0-9_]+)`", row)
        full = [n for n in names if not n.startswith("_")]
        found |= set(full)
        if full:
            parts = full[0].split("_")
            for short in (n for n in names if n.startswith("_")):
                found |= {"_".join(parts[:k]) + short for k in range(1, len(parts))}
    return found


def test_every_environment_variable_is_in_the_operations_settings_table():
    manual = (REPO_ROOT / "docs" / "OPERATIONS.md").read_text()
    read = variables_read()
    assert {"CANDLEFIRE_PG_TABLE", "CANDLEFIRE_CHROMA_COLLECTION", "RAY_ADDRESS"} <= read
    assert sorted(read - documented(manual)) == []


@pytest.mark.parametrize(
    ("old", "new", "value", "read"),
    [
        ("CANDLEFIRE_INGEST_CRON", "CANDLEFIRE_PARITY_CRON", "5 4 * * *",
         lambda: Settings.from_env().parity_cron),
        ("CANDLEFIRE_EXECUTOR", "CANDLEFIRE_RUN_EXECUTOR", "multiprocess",
         lambda: executor_mode()[0]),
        ("CANDLEFIRE_MAX_CONCURRENT", "CANDLEFIRE_RUN_MAX_CONCURRENT", "7",
         lambda: str(executor_mode()[1])),
    ],
)  # fmt: skip
def test_a_renamed_variable_is_read_with_one_deprecation_line(
    monkeypatch, caplog, old, new, value, read
):
    monkeypatch.delenv(new, raising=False)
    monkeypatch.setattr(settings_env, "_WARNED", set())
    monkeypatch.setenv(old, value)
    with caplog.at_level(logging.WARNING, logger=settings_env.__name__):
        assert read() == value
        assert read() == value
    deprecations = [r.getMessage() for r in caplog.records if old in r.getMessage()]
    assert deprecations == [
        f"{old} is deprecated and read until the next release: set {new} instead"
    ]
    monkeypatch.setenv(
        new, "0 0 * * *" if "CRON" in new else "in_process" if "EXEC" in new else "3"
    )
    assert read() != value  # the new name wins when both are set
    assert settings_env.RENAMED[new] == old
