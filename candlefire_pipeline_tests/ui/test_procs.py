"""The process harness the UI and deploy tests rely on to leave nothing running."""

from __future__ import annotations

import signal
import sys

import pytest

from candlefire_pipeline_tests import procs

# A parent that starts a child ignoring SIGTERM, then waits; both must be gone after stop_group.
STUBBORN_TREE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print("ready", flush=True)
time.sleep(600)
"""

REPORT_SIGINT = (
    "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
)


def _ready(log_path):
    return lambda: log_path.exists() and "ready" in log_path.read_text()


def test_stop_group_kills_a_child_that_ignores_sigterm(tmp_path):
    log_path = tmp_path / "tree.log"
    proc = procs.spawn([sys.executable, "-c", STUBBORN_TREE], log_path=log_path)
    procs.wait_until(_ready(log_path), proc=proc, log_path=log_path, what="tree")
    procs.wait_until(
        lambda: len(procs.group_and_descendants(proc.pid)) == 2,
        proc=proc,
        log_path=log_path,
        what="child",
    )
    (child,) = procs.group_and_descendants(proc.pid) - {proc.pid}

    killed = procs.stop_group(proc, grace_s=1.0)

    assert killed == {child}  # the parent went on SIGTERM, the child needed SIGKILL
    assert not procs.running(proc.pid) and not procs.running(child)


def test_spawned_child_gets_sigint_back_even_if_we_ignore_it(tmp_path):
    log_path = tmp_path / "sigint.log"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # like a non-interactive shell's `&`
    try:
        proc = procs.spawn([sys.executable, "-c", REPORT_SIGINT], log_path=log_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert proc.wait(timeout=60) == 0
    assert log_path.read_text().strip() == "True"


def test_wait_until_reports_an_early_exit_with_the_log(tmp_path):
    log_path = tmp_path / "dies.log"
    code = "import sys; print('boom'); sys.exit(3)"
    proc = procs.spawn([sys.executable, "-c", code], log_path=log_path)
    with pytest.raises(procs.ProcessStartError, match="exited with 3:\nboom"):
        procs.wait_until(lambda: False, proc=proc, log_path=log_path, what="server")
