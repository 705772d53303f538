"""`candlefire repair` against the stores the settings name (pgvector by DSN, memory)."""

from __future__ import annotations

import uuid

import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.operations.batches import apply, paper, write_batch


@pytest.fixture
def settings(tmp_path, monkeypatch, pg_dsn) -> Settings:
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", pg_dsn)
    monkeypatch.setenv("CANDLEFIRE_PG_TABLE", f"repair_{uuid.uuid4().hex[:10]}")
    return Settings.from_env()


def test_pgvector_missing_paper_is_reported_then_rewritten(settings, capsys):
    write_batch(settings.batches_dir, "b1", [paper("1"), paper("2", sections=2)])
    store = open_backend("pgvector", settings)
    try:
        apply(store, settings.batches_dir, "b1")
        store.delete_papers(["2"])  # a manual edit, or a restore from an old backup
        assert candlefire(["repair", "--store", "pgvector"]) == 1
        assert "missing: 3 (2_s0, 2_s1, 2_s2)" in capsys.readouterr().out
        assert store.count() == 1  # the dry run wrote nothing
        assert candlefire(["repair", "--store", "pgvector", "--apply"]) == 0
        assert "3 chunks" in capsys.readouterr().out
        assert store.chunk_hashes() == expected_chunks(settings.batches_dir)
    finally:
        store.reset()
        store.close()


def test_memory_store_with_no_ledger_has_nothing_to_do(settings, capsys):
    assert candlefire(["repair", "--store", "memory", "--apply"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_unknown_store_is_a_usage_error(settings, capsys):
    with pytest.raises(SystemExit) as caught:
        candlefire(["repair", "--store", "sqlite"])
    assert caught.value.code == 2
    assert "invalid choice: 'sqlite'" in capsys.readouterr().err
