"""An interrupted `make test` leaves nothing running: the real wrapper (.ci/with-reaper) runs
interrupt_target.py, which starts an embedded Postgres, a Chroma server, a process of its own
session and a daemon nothing stops, then blocks; the run gets SIGTERM as from `timeout` (to its
process group) or SIGINT as from Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.interrupt_target import READY_ENV, teardown_file
from candlefire_pipeline_tests.reap import RUN_MARKER, alive, marked_pids

REPO_ROOT = Path(__file__).resolve().parents[1]
WRAPPER = REPO_ROOT / ".ci" / "with-reaper"
TARGET = Path(__file__).with_name("interrupt_target.py")
#: A bound on waiting for the interrupted run to end (its grace, then the reaper's).
EXIT_LIMIT_S = 600


def _run_env(ready: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != RUN_MARKER}  # the wrapper makes its own
    path = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return {**env, READY_ENV: str(ready), "PYTHONPATH": path, "REAP_PYTHON": sys.executable}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["timeout", "ctrl-c"])
def test_an_interrupted_run_leaves_no_process_behind(sig, tmp_path):
    ready, log_path = tmp_path / "ready.json", tmp_path / "run.log"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", TARGET]
    # its own process group, as `timeout` makes and a terminal's foreground job is
    proc = procs.spawn(
        ["bash", WRAPPER, *command], log_path=log_path, env=_run_env(ready), cwd=REPO_ROOT
    )
    try:
        procs.wait_until(ready.exists, proc=proc, log_path=log_path, what="the run's servers")
        started = json.loads(ready.read_text())
        run = started["run"]
        pids = {started["postgres"], *started["chroma"], started["sleeper"], started["daemon"]}
        assert pids <= marked_pids(run)  # the marker reached each, pg_ctl's daemon included

        os.killpg(proc.pid, sig)
        returncode = proc.wait(timeout=EXIT_LIMIT_S)
    finally:
        procs.stop_group(proc)  # only if the test itself failed: the run is gone by now
    log = log_path.read_text()
    assert returncode == 128 + sig, log
    assert teardown_file(ready).exists(), log  # the signal ended the session through teardown
    assert f"{started['daemon']} (python" in log, log  # the reaper stopped what nothing else did
    assert not marked_pids(run), log
    assert not [pid for pid in pids if alive(pid)], log
