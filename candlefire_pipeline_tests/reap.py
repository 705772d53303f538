"""Stop every process a test run started, found by the run marker in its environment.

`.ci/with-reaper` exports RUN_MARKER=<uuid> before it starts the test command; every process the
tests start inherits it (embedded Postgres through pg_ctl, Chroma, `dg dev` and its daemon and
code servers, Ray, Chromium and chromedriver), also those that left the process tree as their own
session or daemon. `python -m candlefire_pipeline_tests.reap <uuid>` stops them all: Postgres
postmasters first with an immediate shutdown (SIGQUIT), then SIGTERM, then SIGKILL after a grace
period. The standard library only: the wrapper runs it with any python3.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

#: Not CANDLEFIRE_*: tests hand their subprocesses os.environ without every CANDLEFIRE_ setting.
RUN_MARKER = "CFP_TEST_RUN"
#: How long processes get after SIGQUIT (postmasters) and after SIGTERM before the next step.
GRACE_S = 10.0
#: Rounds of TERM/KILL while new marked processes keep appearing (a supervisor respawning).
ROUNDS = 3


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(comm, state, ppid) of pid, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    state, ppid = raw[raw.rindex(")") + 2 :].split()[:2]
    return comm, state, int(ppid)


def alive(pid: int) -> bool:
    """pid exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[1] != "Z"


def _ancestors(pid: int) -> set[int]:
    found = set()
    while pid > 1 and (stat := _stat(pid)) is not None:
        found.add(pid)
        pid = stat[2]
    return found


def _carries(pid: int, needle: bytes) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's process we may not read
        return False
    return needle in environ.split(b"\0")


def marked_pids(run: str) -> set[int]:
    """Live processes started with RUN_MARKER=run, except this process and its ancestors."""
    needle = f"{RUN_MARKER}={run}".encode()
    mine = _ancestors(os.getpid())
    pids = (int(name) for name in os.listdir("/proc") if name.isdigit())
    return {pid for pid in pids if pid not in mine and alive(pid) and _carries(pid, needle)}


def postmasters(pids: set[int]) -> set[int]:
    """The Postgres servers among pids: a `postgres` whose parent is not one."""
    found = set()
    for pid in pids:
        stat = _stat(pid)
        parent = _stat(stat[2]) if stat else None
        if stat and stat[0] == "postgres" and (parent is None or parent[0] != "postgres"):
            found.add(pid)
    return found


def _signal(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(pids: set[int], grace_s: float) -> set[int]:
    deadline = time.monotonic() + grace_s
    while (left := {pid for pid in pids if alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def reap(run: str, grace_s: float = GRACE_S) -> dict[int, str]:
    """Stop every process of the run; pid -> name of each one found (empty: nothing was left)."""
    found: dict[int, str] = {}
    for _ in range(ROUNDS):
        pids = marked_pids(run)
        if not pids:
            break
        found.update({pid: (_stat(pid) or ("?",))[0] for pid in pids})
        servers = postmasters(pids)
        _signal(servers, signal.SIGQUIT)  # immediate shutdown: the server stops its backends
        _wait_gone(servers, grace_s)
        _signal(pids, signal.SIGTERM)
        _signal(_wait_gone(pids, grace_s), signal.SIGKILL)
        _wait_gone(pids, grace_s)
    return found


def main(argv: list[str]) -> int:
    """`reap <run>`: stop the run's processes; exit 1 if any is still running afterwards."""
    if len(argv) != 1 or not argv[0]:
        print("usage: python -m candlefire_pipeline_tests.reap <run>", file=sys.stderr)
        return 2
    found = reap(argv[0])
    if found:
        listed = ", ".join(f"{pid} ({name})" for pid, name in sorted(found.items()))
        print(f"reap: stopped {len(found)} processes the tests left: {listed}", file=sys.stderr)
    left = marked_pids(argv[0])
    if left:
        print(f"reap: still running: {sorted(left)}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
