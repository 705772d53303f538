"""Shadow comparisons are kept: appended locally, flushed into Postgres exactly once when it
answers (never lost while it does not, nor with a read-only role), with bounded retention."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.operations.pending_rows import pending_entries
from candlefire_pipeline.operations.shadow import records as shadow_records
from candlefire_pipeline.operations.shadow.records import (
    ShadowRecord,
    append_records,
    flush_records,
    query_hash,
    read_records,
)
from candlefire_pipeline_tests import procs

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def record(i: int, at: datetime = NOW, **fields) -> ShadowRecord:
    return ShadowRecord(
        record_id=f"rec-{i}", recorded_at=at.isoformat(),
        query_hash=query_hash(f"query {i}", ["SOD1"], ["SPG302"]), served_store="chroma",
        shadow_store="pgvector", served_ms=12.5, shadow_ms=3.25, overlap=14 / 15,
        grounding_equal=True, keyword_equal=False,
        divergences=[{"kind": "missing_chunk", "field": "top15", "pmid": "9"}], **fields,
    )  # fmt: skip


@pytest.fixture
def pending(tmp_path):
    return tmp_path / "data" / "shadow_pending.jsonl"


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM shadow_comparisons").fetchone()[0]


def test_the_query_hash_hides_the_text_and_tells_queries_apart():
    first = query_hash("SPG302 in ALS", ["TDP-43"], ["SPG302"])
    assert len(first) == 64 and "SPG302" not in first
    assert first == query_hash("SPG302 in ALS", ("TDP-43",), ("SPG302",))
    assert first != query_hash("SPG302 in ALS", [], ["SPG302"])


def test_records_round_trip_through_postgres_exactly_once(pending, fresh_pg_dsn):
    records = [record(i, NOW - timedelta(minutes=i)) for i in range(3)]
    append_records(pending, records)
    written = flush_records(fresh_pg_dsn, pending, retention_days=14, now=NOW)
    assert (written.inserted, written.pending) == (3, 0) and not pending.exists()
    append_records(pending, records[:1])  # the same record again (a replayed file)
    flush_records(fresh_pg_dsn, pending, retention_days=14, now=NOW)
    assert _count(fresh_pg_dsn) == 3
    found, why = read_records(fresh_pg_dsn, pending, NOW - timedelta(minutes=1, seconds=1))
    assert why is None and sorted(r.record_id for r in found) == ["rec-0", "rec-1"]
    assert asdict(next(r for r in found if r.record_id == "rec-0")) == asdict(records[0])


def test_with_postgres_down_records_stay_local_and_are_read_from_there(pending, fresh_pg_dsn):
    dead = f"postgresql://cf:secret@127.0.0.1:{procs.free_port()}/x"
    append_records(pending, [record(1), record(2)])
    written = flush_records(dead, pending, retention_days=14, now=NOW)
    assert (written.inserted, written.pending) == (0, 2) and "did not take" in written.warning
    assert "secret" not in written.warning
    found, why = read_records(dead, pending, NOW - timedelta(hours=1))
    assert {r.record_id for r in found} == {"rec-1", "rec-2"} and "local records only" in why
    # Postgres answers again: the next flush inserts them once, the file is gone
    assert flush_records(fresh_pg_dsn, pending, 14, NOW).inserted == 2
    assert _count(fresh_pg_dsn) == 2 and pending_entries(pending) == []


def test_a_read_only_role_leaves_records_local(pending, fresh_pg_dsn):
    with psycopg.connect(fresh_pg_dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS shadow_ro")
        admin.execute("CREATE ROLE shadow_ro LOGIN")
    try:
        read_only = make_conninfo(fresh_pg_dsn, user="shadow_ro")
        append_records(pending, [record(1)])
        written = flush_records(read_only, pending, 14, NOW)
        assert written.pending == 1 and written.inserted == 0
        assert [e["record_id"] for e in pending_entries(pending)] == ["rec-1"]
    finally:
        with psycopg.connect(fresh_pg_dsn, autocommit=True) as admin:
            admin.execute("DROP OWNED BY shadow_ro")
            admin.execute("DROP ROLE shadow_ro")


def test_retention_drops_old_records_locally_and_in_postgres(pending, fresh_pg_dsn, caplog):
    old, recent = NOW - timedelta(days=15), NOW - timedelta(days=1)
    append_records(pending, [record(1, old), record(2, recent)])
    assert flush_records(fresh_pg_dsn, pending, retention_days=14, now=NOW).inserted == 1
    assert "1 local records dropped" in caplog.text
    # a record that reached Postgres and then aged past retention is deleted there
    later = NOW + timedelta(days=14)
    flush_records(fresh_pg_dsn, pending, retention_days=14, now=later)
    assert _count(fresh_pg_dsn) == 0


def test_the_local_file_is_bounded(pending, monkeypatch):
    monkeypatch.setattr(shadow_records, "MAX_PENDING_RECORDS", 3)
    append_records(pending, [record(i, NOW + timedelta(seconds=i)) for i in range(5)])
    assert shadow_records.prune_pending(pending, 14, NOW) == 2
    assert [e["record_id"] for e in pending_entries(pending)] == ["rec-2", "rec-3", "rec-4"]


def test_an_unreadable_line_is_kept_and_never_stops_a_flush(pending, fresh_pg_dsn, caplog):
    append_records(pending, [record(1)])
    with pending.open("a") as handle:
        handle.write('{"record_id": "half-written\n')  # a crash mid-append
    append_records(pending, [record(2)])
    written = flush_records(fresh_pg_dsn, pending, 14, NOW)
    assert written.inserted == 2 and _count(fresh_pg_dsn) == 2
    assert "is not JSON; left in the file" in caplog.text
    assert pending.read_text() == '{"record_id": "half-written\n'  # kept, nothing else
    append_records(pending, [record(3, NOW - timedelta(days=30))])  # pruned next time
    flush_records(fresh_pg_dsn, pending, 14, NOW)
    assert pending.read_text() == '{"record_id": "half-written\n'
