"""Shared fixtures; in CI (CI=true) any skip is turned into a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "candlefire_pipeline_tests.fixtures_backends",
    "candlefire_pipeline_tests.fixtures_ray",
]

IN_CI = os.environ.get("CI", "").lower() == "true"

# Ray clusters in tests live on 127.0.0.1 only. Ray reads this when it is first imported (by a
# Ray test or a process a test starts): without it Ray swaps 127.0.0.1 for the interface address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skip is a failure in CI: {report.longrepr}"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real corpora in ../shared/data (CANDLEFIRE_SHARED_DATA)."""
    root = Path(os.environ.get("CANDLEFIRE_SHARED_DATA", Path(__file__).parents[2] / "shared/data"))
    if not (root / "README.md").exists():
        pytest.skip(f"shared data not found at {root} (set CANDLEFIRE_SHARED_DATA)")
    return root.resolve()
