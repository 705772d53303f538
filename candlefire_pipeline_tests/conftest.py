"""Shared fixtures; in CI (CI=true) any skip is turned into a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = [
    "candlefire_pipeline_tests.fixtures_backends",
    "candlefire_pipeline_tests.fixtures_ray",
    "candlefire_pipeline_tests.fixtures_conformance",
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


@pytest.fixture(scope="session", autouse=True)
def onnx_dir(tmp_path_factory) -> Iterator[Path]:
    """One ONNX export cache for the session, also for subprocesses (CANDLEFIRE_ONNX_DIR).

    Without it every test with its own data dir would export the model again. Set
    CANDLEFIRE_TEST_ONNX_DIR to keep the exports between sessions while iterating.
    """
    kept = os.environ.get("CANDLEFIRE_TEST_ONNX_DIR")
    path = Path(kept) if kept else tmp_path_factory.mktemp("onnx")
    with pytest.MonkeyPatch.context() as env:  # restored after the session
        env.setenv("CANDLEFIRE_ONNX_DIR", str(path))
        yield path


@pytest.fixture(scope="session", autouse=True)
def conformance_cache(tmp_path_factory) -> Iterator[Path]:
    """One conformance result cache for the session, also for subprocesses.

    A result is keyed by code, fixtures, store configuration and server version, so every parity
    report of the session on equally configured stores reuses the first one's check.
    """
    path = tmp_path_factory.mktemp("conformance")
    with pytest.MonkeyPatch.context() as env:  # restored after the session
        env.setenv("CANDLEFIRE_CONFORMANCE_CACHE", str(path))
        yield path
