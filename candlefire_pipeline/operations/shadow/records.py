"""Shadow comparisons: one record per (live request, shadow target), kept in Postgres.

The shadow worker appends each record to a local JSON-lines file (cheap, works with Postgres
down or a read-only serving role) and flushes the file into the `shadow_comparisons` table when
Postgres takes it; shadow_parity flushes too before it reads a window. Retention is bounded:
older records are deleted from the table and dropped from the file (counted in the log).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.fsutil import file_lock
from candlefire_pipeline.operations.pending_rows import (
    CONNECT_TIMEOUT,
    QueuedTable,
    QueueWrite,
    append_entries,
    flush,
    pending_entries,
    rewrite_entries,
)

log = logging.getLogger(__name__)

#: Records the local file holds at most; past it the oldest are dropped (and counted).
MAX_PENDING_RECORDS = 100_000


@dataclass
class ShadowRecord:
    """One live request replayed on one shadow target, compared with the served answer."""

    record_id: str
    recorded_at: str  # UTC ISO 8601: when the served request was answered
    query_hash: str  # sha256 of the query's text, entity names and terms
    served_store: str
    shadow_store: str  # the target's name (a store; later also a store@generation)
    served_ms: float
    shadow_ms: float | None = None  # None: the shadow read failed
    overlap: float | None = None  # top-15 PMID overlap (parity/metrics.overlap)
    grounding_equal: bool | None = None
    keyword_equal: bool | None = None
    error: str | None = None  # the shadow read's failure, one line
    #: traced causes (parity/tracing.py); without the text kept: kind, field, pmid, side only
    divergences: list[dict] = field(default_factory=list)
    query_text: str | None = None  # only with CANDLEFIRE_SHADOW_KEEP_TEXT
    entities: list[str] | None = None
    terms: list[str] | None = None

    @classmethod
    def from_dict(cls, data: dict) -> ShadowRecord:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if isinstance(values.get("recorded_at"), datetime):
            values["recorded_at"] = values["recorded_at"].astimezone(UTC).isoformat()
        return cls(**values)


COLUMNS = tuple(f.name for f in fields(ShadowRecord))
SHADOW_TABLE = QueuedTable(
    name="shadow_comparisons",
    ddl=(
        """CREATE TABLE IF NOT EXISTS shadow_comparisons (
            id               bigserial PRIMARY KEY,
            record_id        text NOT NULL UNIQUE,
            recorded_at      timestamptz NOT NULL,
            query_hash       text NOT NULL,
            served_store     text NOT NULL,
            shadow_store     text NOT NULL,
            served_ms        double precision NOT NULL,
            shadow_ms        double precision,
            overlap          double precision,
            grounding_equal  boolean,
            keyword_equal    boolean,
            error            text,
            divergences      jsonb NOT NULL DEFAULT '[]',
            query_text       text,
            entities         jsonb,
            terms            jsonb
        )""",
        "CREATE INDEX IF NOT EXISTS shadow_comparisons_recorded_at"
        " ON shadow_comparisons (recorded_at)",
    ),
    columns=COLUMNS,
    key="record_id",
    json_columns=frozenset({"divergences", "entities", "terms"}),
)


def query_hash(text: str, entities, terms) -> str:
    """The query's identity without its words: sha256 of text, entity names and terms."""
    given = None if terms is None else list(terms)  # None: the app's rule, not "no terms"
    canonical = json.dumps([text, list(entities), given], ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def pending_lock(pending_file: Path):
    """One writer of the local file at a time, across processes (worker, asset, CLI)."""
    return file_lock(Path(pending_file).with_name(Path(pending_file).name + ".lock"))


def append_records(pending_file: Path, records: list[ShadowRecord]) -> None:
    with pending_lock(pending_file):
        append_entries(pending_file, [asdict(r) for r in records])


def _cutoff(retention_days: int, now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)) - timedelta(days=retention_days)


def prune_pending(pending_file: Path, retention_days: int, now: datetime | None = None) -> int:
    """Drop local records past retention, then the oldest past MAX_PENDING_RECORDS; how many."""
    cutoff = _cutoff(retention_days, now)
    with pending_lock(pending_file):
        entries = pending_entries(pending_file)
        keep = [e for e in entries if _at(e.get("recorded_at")) >= cutoff]
        keep = keep[-MAX_PENDING_RECORDS:]
        ids = {e.get("record_id") for e in keep}
        dropped = len(entries) - len(keep)
        if dropped:
            # an unreadable line has no id: it is kept (pending_entries logged it)
            rewrite_entries(pending_file, lambda line: _record_id(line) in ids | {None})
    if dropped:
        log.warning("shadow: %d local records dropped (older than %d days or past %d records)",
                    dropped, retention_days, MAX_PENDING_RECORDS)  # fmt: skip
    return dropped


def _at(value) -> datetime:
    """A record's time; an unreadable one counts as the oldest possible (pruned first)."""
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _record_id(line: str) -> str | None:
    try:
        return json.loads(line).get("record_id")
    except (json.JSONDecodeError, AttributeError):
        return None


def flush_records(
    dsn: str | None, pending_file: Path, retention_days: int, now: datetime | None = None
) -> QueueWrite:
    """Local records into Postgres (retention applied to both); they stay local if it fails."""
    prune_pending(pending_file, retention_days, now)
    written = flush(dsn, pending_file, lambda: pending_lock(pending_file), SHADOW_TABLE)
    if dsn is not None and written.warning is None:
        try:
            with connect(dsn, timeout=CONNECT_TIMEOUT) as conn:
                for statement in SHADOW_TABLE.ddl:
                    conn.execute(statement)
                conn.execute(
                    "DELETE FROM shadow_comparisons WHERE recorded_at < %s",
                    (_cutoff(retention_days, now),),
                )
        except (BackendUnavailableError, psycopg.Error) as exc:
            log.warning("shadow: retention not applied in Postgres: %s", type(exc).__name__)
    return written


def read_records(
    dsn: str | None, pending_file: Path, since: datetime
) -> tuple[list[ShadowRecord], str | None]:
    """Records answered at or after `since`: Postgres plus what is still local (deduplicated).
    The second value says why Postgres could not be read (then only the local ones count)."""
    local = [ShadowRecord.from_dict(e) for e in pending_entries(pending_file)]
    local = [r for r in local if _at(r.recorded_at) >= since]
    if dsn is None:
        return local, "no Postgres configured"
    try:
        with connect(dsn, timeout=CONNECT_TIMEOUT) as conn:
            if not conn.execute("SELECT to_regclass('shadow_comparisons')").fetchone()[0]:
                return local, None
            cursor = conn.execute(
                "SELECT " + ", ".join(COLUMNS) + " FROM shadow_comparisons"
                " WHERE recorded_at >= %s ORDER BY recorded_at",
                (since,),
            )
            stored = [ShadowRecord.from_dict(dict(zip(COLUMNS, row, strict=True)))
                      for row in cursor.fetchall()]  # fmt: skip
    except (BackendUnavailableError, psycopg.Error) as exc:
        return local, f"Postgres unreachable ({type(exc).__name__}): local records only"
    seen = {r.record_id for r in stored}
    return stored + [r for r in local if r.record_id not in seen], None
