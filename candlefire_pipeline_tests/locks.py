"""Waiting until another thread or process is blocked on a file lock, for tests that must
know a waiter is queued behind the holder (not merely started) before they let go."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

#: A bound on waiting for a waiter to queue; never a performance assertion.
WAIT_LIMIT_S = 120.0


def flock_waiters(path: Path) -> int:
    """How many flock() requests are blocked on the file at `path` right now (/proc/locks
    lists each queued request as a `->` line under the lock that holds it back)."""
    inode = str(os.stat(path).st_ino)  # by inode only: an overlay may report another device
    count = 0
    for line in Path("/proc/locks").read_text().splitlines():
        # "3: -> FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF"
        fields = line.split()
        if len(fields) > 6 and fields[1:3] == ["->", "FLOCK"]:
            count += fields[6].rsplit(":", 1)[-1] == inode
    return count


def wait_until_blocked(
    path: Path, alive: Callable[[], bool], *, waiters: int = 1, limit_s: float = WAIT_LIMIT_S
) -> None:
    """Poll until `waiters` flock() calls are queued on `path`; fail at once if `alive()` turns
    false (the waiter got through or died), or after limit_s."""
    deadline = time.monotonic() + limit_s
    while flock_waiters(path) < waiters:
        if not alive():
            raise AssertionError(f"the waiter finished instead of queueing on {path}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"no waiter queued on {path} within {limit_s:.0f}s")
        time.sleep(0.01)
