"""Shared fixtures; in CI (CI=true) any skip is turned into a failure."""

from __future__ import annotations

import os
import signal
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


def pytest_configure(config):
    """SIGTERM (a CI timeout, `timeout`, .ci/with-reaper) ends the session as Ctrl-C does, in the
    main process and in every xdist worker: pytest then tears every fixture down (its
    pytest_sessionfinish runs teardown_exact) and the servers they started stop. Python's default
    SIGTERM exits at once and skips every teardown."""
    try:
        # a background job of a script starts with SIGINT ignored: Ctrl-C must reach us too
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupted)
    except ValueError:  # not the main thread: signals cannot reach this interpreter's hooks
        pass


def _interrupted(signum, frame):
    # a second SIGTERM (make passes one on too) must not cut the teardown short; a handler, not
    # SIG_IGN, so that processes started during the teardown get the default back on exec
    signal.signal(signal.SIGTERM, lambda *_: None)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


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


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A session folder every pytest-xdist worker of the run shares (one export, one
    conformance check for all of them: both are written atomically, under a lock where it
    matters); without xdist, the session's own."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return tmp_path_factory.mktemp(name)
    path = tmp_path_factory.getbasetemp().parent / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def onnx_dir(tmp_path_factory) -> Iterator[Path]:
    """One ONNX export cache for the session, also for subprocesses (CANDLEFIRE_ONNX_DIR).

    Without it every test with its own data dir would export the model again. Set
    CANDLEFIRE_TEST_ONNX_DIR to keep the exports between sessions while iterating.
    """
    kept = os.environ.get("CANDLEFIRE_TEST_ONNX_DIR")
    path = Path(kept) if kept else shared_dir(tmp_path_factory, "onnx")
    with pytest.MonkeyPatch.context() as env:  # restored after the session
        env.setenv("CANDLEFIRE_ONNX_DIR", str(path))
        yield path


@pytest.fixture(scope="session", autouse=True)
def conformance_cache(tmp_path_factory) -> Iterator[Path]:
    """One conformance result cache for the session, also for subprocesses.

    A result is keyed by code, fixtures, store configuration and server version, so every parity
    report of the session on equally configured stores reuses the first one's check.
    """
    path = shared_dir(tmp_path_factory, "conformance")
    with pytest.MonkeyPatch.context() as env:  # restored after the session
        env.setenv("CANDLEFIRE_CONFORMANCE_CACHE", str(path))
        yield path


#: Fixtures that start a server or a process (Postgres, Chroma, Qdrant, Ray), or load the
#: packaged model: a test using one (directly or through another fixture) is marked `server`.
SERVER_FIXTURES = frozenset({
    "pg_server", "pg_dsn", "fresh_pg_dsn", "make_backend", "backend", "own_pg", "ray_cluster",
    "conformance_embedder", "conformance_exact", "chroma_server", "qdrant_server",
})  # fmt: skip
#: Test folders whose every test starts processes (dg dev, the daemon, a browser, servers) or
#: loads the packaged model (embedding: ONNX exports, torch, Ray).
SERVER_FOLDERS = frozenset({"ui", "deploy", "defs", "reliability", "embedding"})
#: Modules that start a server or the CLI in a subprocess without a fixture saying so.
SERVER_MODULES = frozenset({
    "test_cli.py", "test_cli_output.py", "test_repo_tooling.py", "test_definitions.py",
    "test_interrupted_run.py", "test_xdist_groups.py",
    "backends/pg/test_upgrade.py", "backends/pg/test_system_user.py",
    "backends/test_factory_and_server.py",
    "operations/test_version_floor.py", "operations/serving/test_history.py",
})  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist's, which turns xdist_group marks into node ids
def pytest_collection_modifyitems(config, items):
    """`server` on every test that needs one (make check runs the others: the inner loop);
    the Ray tests in one xdist group (one local Ray head at a time on this machine); the tests
    of a module with a module-scoped fixture in one group each, or every worker would build the
    fixture again (the UI module's `make demo` ran three times: 200 s each). Then the order
    `make test` hands work out in (--no-loadscope-reorder): the groups and modules holding a
    `slow` test (dagster processes, browsers) first, the other groups next, single tests last,
    so that no long test starts late and runs on alone at the end."""
    for item in items:
        where = item.path.relative_to(Path(__file__).parent)
        if (
            where.parts[0] in SERVER_FOLDERS
            or where.as_posix() in SERVER_MODULES
            or SERVER_FIXTURES.intersection(item.fixturenames)
        ):
            item.add_marker(pytest.mark.server)
        if "ray_cluster" in item.fixturenames or "ray" in item.path.stem:
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(where.as_posix()))
    slow = {_scope(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (_scope(item) not in slow, _group(item) is None))  # stable


def _group(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else mark.args[0]


def _scope(item) -> str:
    """What runs together: the item's xdist group, else its module."""
    return _group(item) or item.path.as_posix()


def _uses_a_module_fixture(item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return False
    return any(defs and defs[-1].scope == "module"
               for defs in definitions.name2fixturedefs.values())  # fmt: skip
