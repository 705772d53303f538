"""A point-in-time restore (`--to` an LSN) over a running data directory: the replay stops at
the point, the ledger re-applies what came after, the old directory is moved aside."""

from __future__ import annotations

import psycopg
import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.operations.backup import archive
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.operations.backup.steps import backed_up, command, held, ingest
from candlefire_pipeline_tests.operations.batches import paper

#: every test here starts an embedded Postgres of its own
pytestmark = pytest.mark.server


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
