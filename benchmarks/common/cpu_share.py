"""CPU used by processes other than the benchmark's own, read from /proc (Linux).

The 1-minute load average cannot tell a benchmark that keeps both cores busy (a parallel index
build, a 2-thread ONNX session) from other work on the machine: both read ~2 here. What makes a
timing unrepresentative is the second, so this counts it directly: all busy CPU time minus that
of this process, its descendants and the servers it started (processes whose command line names
one of the benchmark's own folders, e.g. an embedded Postgres' data directory, and their
descendants).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def busy_and_total_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot; idle and iowait are not busy."""
    fields = [int(x) for x in (PROC / "stat").read_text().splitlines()[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, ticks, command line) of every readable process.

    Ticks are user + system time of the process and of its children it has waited for: when a
    child exits (initdb, a closed Postgres backend), its time moves into its parent's count.
    """
    table = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:  # exited between the listing and the read
            continue
        rest = stat[stat.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
        table[int(entry.name)] = (
            int(rest[1]),
            sum(int(x) for x in rest[11:15]),
            cmdline.replace(b"\0", b" ").decode(errors="replace"),
        )
    return table


def own_pids(table: dict[int, tuple[int, int, str]], root: int, markers: Iterable[str]) -> set[int]:
    """`root`, the processes whose command line holds a marker, and all their descendants."""
    markers = [m for m in markers if m]
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = [root, *(pid for pid, (_, _, cmd) in table.items() if any(m in cmd for m in markers))]
    own: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid not in own:
            own.add(pid)
            stack.extend(children.get(pid, ()))
    return own


class CpuShare:
    """Share of all CPUs that other processes used between consecutive samples."""

    def __init__(self, markers: Iterable[str | os.PathLike] = ()) -> None:
        self.markers = [str(m) for m in markers]
        self.available = (PROC / "stat").exists()
        self.shares: list[float] = []
        self._last: tuple[int, int, dict[int, tuple[int, int]]] | None = None

    def sample(self) -> None:
        if not self.available:
            return
        busy, total = busy_and_total_ticks()
        table = process_table()
        # pid -> (ticks, parent pid)
        cpu = {
            pid: (table[pid][1], table[pid][0])
            for pid in own_pids(table, os.getpid(), self.markers)
        }
        if self._last is not None:
            last_busy, last_total, last_cpu = self._last
            # a process new since the last sample counts from zero: it started in between; one
            # gone since has its time counted again in its parent's, so its last count goes
            ours = sum(max(0, t - last_cpu.get(pid, (0, 0))[0]) for pid, (t, _) in cpu.items())
            ours -= sum(
                t for pid, (t, parent) in last_cpu.items() if pid not in cpu and parent in cpu
            )
            elapsed = total - last_total
            if elapsed > 0:
                others = max(0, (busy - last_busy) - ours)
                self.shares.append(min(1.0, others / elapsed))
        self._last = (busy, total, cpu)
