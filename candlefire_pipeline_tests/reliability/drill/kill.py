"""The drill's kills: SIGKILL the run worker, or the whole Postgres server (the postmaster and
every child, as an OOM kill of the machine's database would), and the phases they aim at."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres

#: How long a phase is looked for before the point counts as missed (the worker finished
#: first); a bound on waiting, never a performance assertion.
PHASE_LIMIT_S = 600.0


@dataclass(frozen=True)
class Phase:
    """Where in a stage a kill aims: a statement the worker's backend runs (pg_stat_activity
    query text, matched with LIKE), or None: any time after the worker said `go`."""

    name: str
    query_like: str | None = None
    #: a statement seen first (the COPY before a first load's index builds: the same CREATE
    #: INDEX also runs on the empty table when it is made)
    after_like: str | None = None


def children_of(pid: int) -> list[int]:
    """Every process whose parent is pid (a postmaster's backends and helpers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def kill_server(server: EmbeddedPostgres) -> None:
    """SIGKILL the postmaster, then every child it had: no shutdown path runs anywhere."""
    pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    children = children_of(pid)
    for target in (pid, *children):
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for target in (pid, *children):
        _wait_gone(target)
    server.stop()  # nothing runs: forget the handle, so `dsn` starts it again (crash recovery)


def _wait_gone(pid: int) -> None:
    """Until the killed process is reaped (init reaps the daemonized server's processes)."""
    deadline = time.monotonic() + PHASE_LIMIT_S
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still exists after SIGKILL")
        time.sleep(0.01)


def kill_worker(worker: subprocess.Popen) -> None:
    """SIGKILL the run worker (its Postgres backend ends at the next client check)."""
    worker.send_signal(signal.SIGKILL)
    worker.wait()


def active_statement(watcher: psycopg.Connection, like: str) -> str | None:
    """The first active statement of another session whose text matches `like`."""
    row = watcher.execute(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 80) FROM pg_stat_activity"
        " WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE %s LIMIT 1",
        [like],
    ).fetchone()
    return None if row is None else row[0]


def running_statement(watcher: psycopg.Connection) -> str:
    """What the worker's backends run now (the place a kill lands), or `between statements`."""
    rows = watcher.execute(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 60) FROM pg_stat_activity"
        " WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    ).fetchall()
    return "; ".join(sorted(r[0] for r in rows)) or "between statements"
