"""WAL archiving on the embedded server: configured once (archive_mode needs a restart), and the
archive's segments checked for a gap before a restore replays them.

The settings go to postgresql.auto.conf (ALTER SYSTEM), inside the data directory: a base
backup carries them, so a restored server keeps archiving into the same folder (a restore starts
a new timeline, whose segments have other names).
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.backup.tools import BackupError, give_to, owner

log = logging.getLogger(__name__)

#: A segment is switched at least this often while anything is written: it bounds what a lost
#: disk takes with it before the archive has it (the ledger re-applies that part anyway).
ARCHIVE_TIMEOUT = "60s"
#: How long a closed segment may take to reach the archive.
SEGMENT_WAIT = 60.0
#: A path Postgres' archive and restore commands can take unquoted, through a shell.
SAFE_PATH = re.compile(r"[A-Za-z0-9_./-]+")
#: A WAL segment's file name: timeline, then the segment number in two 8-digit halves.
SEGMENT = re.compile(r"[0-9A-F]{24}")
SEGMENTS_PER_ID = 0x100  # 16 MB segments: 4 GiB of WAL per "log id"


def wal_dir(backup_dir: Path) -> Path:
    return Path(backup_dir) / "wal"


def _checked_path(path: Path) -> str:
    text = str(Path(path).resolve())
    if not SAFE_PATH.fullmatch(text):
        raise BackupError(f"the backup folder {text!r} must hold only letters, digits, _ . / -")
    return text


def archive_command(backup_dir: Path) -> str:
    """Copy a segment in under a temporary name, then rename: a half-copied file never looks
    archived; an existing one is never overwritten (Postgres retries, and says so in its log)."""
    wal = _checked_path(wal_dir(backup_dir))
    return f"test ! -f {wal}/%f && cp %p {wal}/%f.part && mv {wal}/%f.part {wal}/%f"


def restore_command(backup_dir: Path) -> str:
    return f"cp {_checked_path(wal_dir(backup_dir))}/%f %p"


def archiving(dsn: str, backup_dir: Path) -> bool:
    """Whether the server archives into this backup folder now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        mode = conn.execute("SHOW archive_mode").fetchone()[0]
        command = conn.execute("SHOW archive_command").fetchone()[0]
    return mode == "on" and command == archive_command(backup_dir)


def enable(server: EmbeddedPostgres, backup_dir: Path) -> bool:
    """Archive WAL into backup_dir/wal (restarting the server when archive_mode changes);
    True when it was already on. Waits for one segment to arrive, so a folder the server
    cannot write is an error now, not WAL piling up under data/pg."""
    dsn = server.dsn  # started first: the archive belongs to the Unix user owning data/pg
    folder = wal_dir(backup_dir)
    folder.mkdir(parents=True, exist_ok=True)
    give_to(folder, owner(server.data_dir))
    if archiving(dsn, backup_dir):
        return True
    with psycopg.connect(dsn, autocommit=True) as conn:
        wanted = {"archive_mode": "on", "archive_command": archive_command(backup_dir),
                  "archive_timeout": ARCHIVE_TIMEOUT}  # fmt: skip
        for name, value in wanted.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                sql.Identifier(name), sql.Literal(value)))  # fmt: skip
    log.warning("restarting the embedded server under %s: archive_mode takes a restart",
                server.data_dir)  # fmt: skip
    server.stop()
    archived_now(server.dsn, backup_dir)
    return False


def archived_now(dsn: str, backup_dir: Path) -> str:
    """Close the current segment and wait until the archive holds it: everything written so far
    is archived. Its name."""
    folder = wal_dir(backup_dir)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a record in the current segment: with nothing written since the last switch,
        # pg_switch_wal would not switch and the segment named would never be archived
        conn.execute("SELECT pg_logical_emit_message(false, 'candlefire', 'archive now')")
        name = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()[0]
        deadline = time.monotonic() + SEGMENT_WAIT
        while not (folder / name).exists():
            if time.monotonic() > deadline:
                failed = conn.execute("SELECT last_failed_wal FROM pg_stat_archiver").fetchone()[0]
                raise BackupError(
                    f"segment {name} did not reach {folder} within {SEGMENT_WAIT:.0f} s "
                    f"(last failed: {failed}); can the server's Unix user write there?"
                )
            time.sleep(0.2)
    return name


def segment_number(name: str) -> int:
    return int(name[8:16], 16) * SEGMENTS_PER_ID + int(name[16:24], 16)


def first_gap(backup_dir: Path, start_segment: str, base_wal: Path) -> str | None:
    """The first segment missing between the backup's start and the archive's last one (in the
    archive or the base's own pg_wal; any timeline holding a number counts), or None: a gap
    would end the replay there, silently."""
    files = [*wal_dir(backup_dir).iterdir(), *Path(base_wal).iterdir()]
    held = {segment_number(p.name) for p in files if SEGMENT.fullmatch(p.name)}
    start = segment_number(start_segment)
    later = [n for n in held if n >= start]
    for number in range(start, max(later, default=start) + 1):
        if number not in held:
            high, low = divmod(number, SEGMENTS_PER_ID)
            return f"{start_segment[:8]}{high:08X}{low:08X}"
    return None
