"""Backup and restore of the embedded server through the operator's commands, on a server of
the test's own: the data directory lost after drops the backup lacks, a point-in-time restore,
and a gap in the WAL archive."""

from __future__ import annotations

import shutil

import psycopg

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.operations.backup.steps import backed_up, command, held, ingest
from candlefire_pipeline_tests.operations.batches import paper


def test_a_lost_data_directory_is_restored_and_the_ledger_reapplied(deployment, capsys):
    settings = deployment
    ingest(settings, "b1", [paper("1"), paper("2", sections=2), paper("3"), paper("4")])
    out = backed_up(settings, capsys)
    assert "4 chunks" in out or "6 chunks" in out
    # accepted after the backup: paper 3 changed, 5 new, 4 deleted; then 6 with full text
    ingest(settings, "b2", [paper("3", "v2"), paper("5")], deletes=["4"])
    ingest(settings, "b3", [paper("6", sections=2)])
    EmbeddedPostgres(settings.pg_data_dir).stop()
    shutil.rmtree(settings.pg_data_dir)  # the disk under data/pg is gone
    code, out, err = command(capsys, "restore")
    assert code == 0, err
    assert held(settings) == expected_chunks(settings.batches_dir)
    assert "missing 0, stale 0, orphaned 0" in out
    assert "btree" in out and "gin" in out and "hnsw" in out
    with opened_backend("pgvector", settings) as store:
        report = audit(store)
        assert report.checked > 0 and report.exact
    assert "replaced" not in out  # nothing was there to move aside


def _lsn(settings: Settings) -> str:
    with psycopg.connect(EmbeddedPostgres(settings.pg_data_dir).dsn) as conn:
        return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]


def test_a_point_in_time_restore_replays_to_the_point_then_the_ledger(deployment, capsys):
    settings = deployment
    ingest(settings, "b1", [paper("1"), paper("2")])
    backed_up(settings, capsys)
    ingest(settings, "b2", [paper("2", "v2"), paper("3")])
    point = _lsn(settings)
    ingest(settings, "b3", [paper("4", sections=2)])
    archive.archived_now(EmbeddedPostgres(settings.pg_data_dir).dsn, settings.data_dir / "backups")
    code, out, err = command(capsys, "restore", "--to", point)
    assert code == 0, err
    # replayed to the point: b2 was there, b3 (paper 4's three chunks) was re-applied
    assert "found missing 3, stale 0, orphaned 0" in out
    assert held(settings) == expected_chunks(settings.batches_dir)
    assert "kept in" in out  # the running data directory was moved aside, not deleted
    assert next(settings.data_dir.glob("pg.replaced-*/PG_VERSION")).exists()


def test_a_gap_in_the_wal_archive_is_an_error_not_a_partial_restore(deployment, capsys):
    settings = deployment
    ingest(settings, "b1", [paper("1")])
    backed_up(settings, capsys)
    folder = settings.data_dir / "backups"
    dsn = EmbeddedPostgres(settings.pg_data_dir).dsn
    ingest(settings, "b2", [paper("2")])
    lost = archive.archived_now(dsn, folder)
    ingest(settings, "b3", [paper("3")])
    archive.archived_now(dsn, folder)
    (folder / "wal" / lost).unlink()
    before = held(settings)
    code, _, err = command(capsys, "restore")
    assert code == 2 and f"lacks segment {lost}" in err
    assert held(settings) == before == expected_chunks(settings.batches_dir)
