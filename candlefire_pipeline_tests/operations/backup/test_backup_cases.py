"""The vacuous and the external cases of backup and restore: restore with no backup, a backup
of an empty store, `backup take` and `restore --reconcile-only` on an external Postgres."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.operations.backup.manifest import backups
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.operations.backup.steps import backed_up, command, held, ingest
from candlefire_pipeline_tests.operations.batches import paper

#: every test here starts an embedded Postgres of its own
pytestmark = pytest.mark.server


def test_restore_without_a_backup_and_a_backup_of_an_empty_store(deployment, capsys):
    settings = deployment
    code, _, err = command(capsys, "restore")
    assert code == 2 and "no backup under" in err and "nothing to restore from" in err
    out = backed_up(settings, capsys)
    assert ", 0 chunks," in out
    ingest(settings, "b1", [paper("1"), paper("2", sections=1)])
    code, out, err = command(capsys, "restore")
    assert code == 0, err
    assert held(settings) == expected_chunks(settings.batches_dir) != {}


def test_reconcile_only_repairs_an_external_postgres(fresh_pg_dsn, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", fresh_pg_dsn)
    settings = Settings.from_env()
    ingest(settings, "b1", [paper("1"), paper("2", sections=2)])
    with opened_backend("pgvector", settings) as store:
        store.delete_papers(["2"])  # the provider's snapshot predates this paper
    code, _, err = command(capsys, "backup", "take")
    assert code == 2 and "external Postgres" in err and "--reconcile-only" in err
    code, out, err = command(capsys, "restore", "--reconcile-only")
    assert code == 0, err
    assert "found missing 3, stale 0, orphaned 0" in out
    assert held(settings) == expected_chunks(settings.batches_dir)
    assert backups(settings.data_dir / "backups") == []
