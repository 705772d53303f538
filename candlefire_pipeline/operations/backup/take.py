"""`candlefire backup take`: a base backup of the embedded server with pg_basebackup (plain
format, its WAL streamed in, so the base alone is consistent), checked by pg_verifybackup, and
its manifest: the WAL range from pg_basebackup's own backup_manifest, the ledger and the switch
as they stood when it started."""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline.operations.backup.manifest import (
    BackupManifest,
    backup_path,
    write_manifest,
)
from candlefire_pipeline.operations.backup.tables import pg_generations
from candlefire_pipeline.operations.backup.tools import BackupError, run, tree_bytes
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE

#: backup_label's line naming the segment the backup starts in.
START_SEGMENT = re.compile(r"START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)")


def embedded_server(settings: Settings) -> EmbeddedPostgres:
    """The embedded server; an external Postgres (CANDLEFIRE_PG_DSN) is backed up by its
    provider (docs/OPERATIONS.md), and only reconciled here."""
    if settings.pg_dsn:
        raise BackupError(
            "CANDLEFIRE_PG_DSN names an external Postgres: back it up with the provider's "
            "snapshots or pgBackRest, then run `candlefire restore --reconcile-only` after one"
        )
    return EmbeddedPostgres(settings.pg_data_dir)


def take_backup(settings: Settings, backup_dir: Path, label: str | None = None) -> BackupManifest:
    """A new base backup under backup_dir/base/<label>; WAL archiving must already be on."""
    server = embedded_server(settings)
    dsn = server.dsn
    if not archive.archiving(dsn, backup_dir):
        raise BackupError(
            f"WAL archiving into {archive.wal_dir(backup_dir)} is off: run `candlefire backup "
            "enable` first (it restarts the embedded server once)"
        )
    label = label or datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = backup_path(backup_dir, label)
    if target.exists():
        raise BackupError(f"a backup named {label!r} exists already under {backup_dir}")
    started, applied, chunks = datetime.now(UTC), _ledger_now(settings), _chunks_now(settings, dsn)
    switch = _switch_now(settings)
    clock = time.perf_counter()
    base = target / "pgdata"
    try:
        run("pg_basebackup", ["-d", dsn, "-D", str(base), "-Fp", "-X", "stream", "-c", "fast",
                              "-l", f"candlefire {label}", "--no-password"])  # fmt: skip
        run("pg_verifybackup", [str(base)])
    except BackupError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    seconds = time.perf_counter() - clock
    ranges = json.loads((base / "backup_manifest").read_text())["WAL-Ranges"]
    found = START_SEGMENT.search((base / "backup_label").read_text())
    manifest = BackupManifest(
        label=label, started_at=started.isoformat(), ended_at=datetime.now(UTC).isoformat(),
        timeline=ranges[-1]["Timeline"], start_lsn=ranges[0]["Start-LSN"],
        end_lsn=ranges[-1]["End-LSN"], start_segment=found.group(1), bytes=tree_bytes(base),
        seconds=round(seconds, 3), applied=applied, chunks=chunks, switch=switch,
    )  # fmt: skip
    write_manifest(backup_dir, manifest)
    return manifest


def _ledger_now(settings: Settings) -> dict[str, list[str]]:
    return {
        s.pg_table: sorted(StoreLedger(s.batches_dir, CANDIDATE).applied())
        for s in pg_generations(settings).values()
    }


def _chunks_now(settings: Settings, dsn: str) -> dict[str, int]:
    counts = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for s in pg_generations(settings).values():
            if conn.execute("SELECT to_regclass(%s)", [s.pg_table]).fetchone()[0] is None:
                counts[s.pg_table] = 0
                continue
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(s.pg_table))
            counts[s.pg_table] = conn.execute(query).fetchone()[0]
    return counts


def _switch_now(settings: Settings) -> dict | None:
    path = settings.serving_file
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None  # an unreadable switch is recorded as unknown; the restore reads it anew
