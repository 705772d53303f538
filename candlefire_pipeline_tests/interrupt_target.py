"""The run test_interrupted_run.py interrupts; not collected by the suite (no test_ prefix).

Its one test starts what the suite's tests start (the session's embedded Postgres, a Chroma
server, a process in a session of its own, a daemon no teardown stops), writes their pids to the
file CFP_INTERRUPT_READY names, then blocks until the run is interrupted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.deploy.conftest import chroma_server
from candlefire_pipeline_tests.reap import RUN_MARKER

READY_ENV = "CFP_INTERRUPT_READY"
SLEEP = "import time; time.sleep(900)"


def teardown_file(ready: Path) -> Path:
    """Written when the fixtures' teardown starts (SIGTERM ran it, not only the reaper)."""
    return ready.with_name(ready.name + ".teardown")


@pytest.fixture
def started(pg_server: EmbeddedPostgres, tmp_path: Path) -> Iterator[dict[str, object]]:
    ready = Path(os.environ[READY_ENV])
    with procs.scratch_dir("interrupt") as root:
        with chroma_server(root / "chroma", tmp_path / "chroma.log"):
            sleeper = procs.spawn([sys.executable, "-c", SLEEP], log_path=tmp_path / "sleep.log")
            # a daemon of its own session that nothing stops: only the reaper can
            daemon = subprocess.Popen([sys.executable, "-c", SLEEP], start_new_session=True)
            try:
                yield {
                    "postgres": pg_server.pid,
                    "chroma": sorted(procs.pids_with_arg(str(root / "chroma"))),
                    "sleeper": sleeper.pid,
                    "daemon": daemon.pid,
                }
            finally:
                teardown_file(ready).write_text("teardown started\n")
                procs.stop_group(sleeper)


def test_blocks_until_interrupted(started: dict[str, object]) -> None:
    ready = Path(os.environ[READY_ENV])
    partial = ready.with_name(ready.name + ".partial")
    partial.write_text(json.dumps({"run": os.environ[RUN_MARKER], **started}))
    partial.rename(ready)
    time.sleep(900)
