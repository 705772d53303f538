"""Benchmarks flag other processes' CPU, not their own (a 2-core build reads load ~2 alone)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.common import machine_load
from benchmarks.common.cpu_share import CpuShare, own_pids, process_table

# pid -> (parent pid, ticks, command line)
TABLE = {
    1: (0, 0, "init"),
    10: (1, 5, "python bench.py"),
    11: (10, 5, "python worker"),
    12: (11, 5, "python grandchild"),
    20: (1, 5, "postgres -D /tmp/bench/pg"),
    21: (20, 5, "postgres: checkpointer"),
    30: (1, 5, "postgres -D /var/lib/other"),
    31: (30, 5, "postgres: walwriter"),
}


@pytest.mark.parametrize(
    ("root", "markers", "expected"),
    [
        (10, [], {10, 11, 12}),
        (10, ["/tmp/bench"], {10, 11, 12, 20, 21}),
        (11, ["/tmp/bench", ""], {11, 12, 20, 21}),  # an empty marker matches nothing
        (99, [], {99}),  # a root that already exited is only itself
    ],
)
def test_own_pids_are_the_tree_and_the_marked_servers(root, markers, expected):
    assert own_pids(TABLE, root, markers) == expected


def _busy_loop(detached: bool) -> subprocess.Popen:
    # runs until the test kills it (bounded only as a safety net): alive when the table is read
    loop = "import time\nend = time.time() + 600\nwhile time.time() < end: pass"
    if detached:  # the shell exits at once: the loop is re-parented, no longer ours
        # its output goes elsewhere, so reading the shell's ends with the shell, not the loop
        command = f'"{sys.executable}" -c "{loop}" >/dev/null 2>&1 & echo $!'
        return subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE, text=True)
    return subprocess.Popen([sys.executable, "-c", loop])


def test_a_detached_process_is_other_work_and_a_child_is_ours():
    child = _busy_loop(detached=False)
    shell = _busy_loop(detached=True)
    other = int(shell.communicate(timeout=60)[0].strip())  # the shell has exited and is reaped
    try:
        table = process_table()
        own = own_pids(table, os.getpid(), [])
        assert child.pid in own and other in table and other not in own
    finally:
        child.kill()
        child.wait()
        try:
            os.kill(other, 9)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize(("shares", "flagged"), [([0.02, 0.05], False), ([0.3, 0.3], True),
                                                 ([0.0, 0.0, 0.9], True)])  # fmt: skip
def test_the_note_flags_other_processes_cpu_not_the_load(shares, flagged):
    monitor = machine_load.LoadMonitor()
    monitor.samples = [2.0 * (os.cpu_count() or 1)]  # the benchmark alone keeps every core busy
    monitor.others.shares = shares
    note = monitor.note()
    assert "Other processes" in note and ("Unrepresentative" in note) == flagged


def _scripted(monkeypatch, samples):
    """Feed CpuShare scripted /proc readings: (busy, total, table) per sample."""
    from benchmarks.common import cpu_share

    readings = iter(samples)
    current = {}

    def ticks():
        current["sample"] = next(readings)
        return current["sample"][:2]

    monkeypatch.setattr(cpu_share, "busy_and_total_ticks", ticks)
    monkeypatch.setattr(cpu_share, "process_table", lambda: current["sample"][2])
    monkeypatch.setattr(cpu_share.os, "getpid", lambda: 10)


CHILD = {10: (1, 100, "bench"), 11: (10, 50, "child"), 30: (1, 0, "other")}
DAEMON = {10: (1, 100, "bench"), 11: (1, 50, "postgres -D /bench/pg"), 30: (1, 0, "other")}


@pytest.mark.parametrize(
    ("first", "second", "busy_delta", "expected_share"),
    [
        # the child exited and was reaped: its 50 earlier ticks now sit in the parent's 200
        (CHILD, {10: (1, 200, "bench")}, 50, 0.0),
        # the same, plus 100 ticks of another process (of 1000 in the interval)
        (CHILD, {10: (1, 200, "bench"), 30: (1, 100, "other")}, 150, 0.1),
        # a server of ours exited with no parent of ours to inherit its time: nothing taken back
        (DAEMON, {10: (1, 120, "bench")}, 20, 0.0),
    ],
)
def test_a_finished_child_is_not_counted_twice(
    monkeypatch, first, second, busy_delta, expected_share
):
    _scripted(monkeypatch, [(1000, 4000, first), (1000 + busy_delta, 5000, second)])
    share = CpuShare(markers=["/bench"])
    share.sample()
    share.sample()
    assert share.shares == [pytest.approx(expected_share)]
