"""Backup and restore of the embedded server through the operator's commands, on a server of
the test's own: the data directory lost after drops the backup lacks, and a gap in the WAL
archive."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline_tests.operations.backup.steps import (
    backed_up,
    command,
    held,
    ingest,
    lose_data_dir,
)
from candlefire_pipeline_tests.operations.batches import paper

#: every test here starts an embedded Postgres of its own
pytestmark = pytest.mark.server


def test_a_lost_data_directory_is_restored_and_the_ledger_reapplied(
    deployment, monkeypatch, capsys
):

    settings = deployment
    # no timed segment switch: what the archive lacks at the loss is exactly b2 and b3
    monkeypatch.setattr(archive, "ARCHIVE_TIMEOUT", "0")
    ingest(settings, "b1", [paper("1"), paper("2", sections=2), paper("3"), paper("4")])
    assert ", 6 chunks," in backed_up(settings, capsys)
    # accepted after the backup: paper 3 changed, 5 new, 4 deleted; then 6 with full text
    ingest(settings, "b2", [paper("3", "v2"), paper("5")], deletes=["4"])
    ingest(settings, "b3", [paper("6", sections=2)])
    lose_data_dir(settings)
    code, out, err = command(capsys, "restore")
    assert code == 0, err
    # the replay ended at the archive's end (the backup): the ledger re-applied b2 and b3
    assert "default: 3 batches in its ledger; found missing 4, stale 1, orphaned 1" in out
    assert held(settings) == expected_chunks(settings.batches_dir)
    assert "btree" in out and "gin" in out and "hnsw" in out
    with opened_backend("pgvector", settings) as store:
        report = audit(store)
        assert report.checked > 0 and report.exact
    assert "replaced" not in out  # nothing was there to move aside


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
