"""A generation created and promoted after the backup, then the data directory lost: the
restore rebuilds it from its own ledger before the store is put back, or refuses when it
cannot; the switch file stays the truth and the history records it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.state import (
    PROMOTED,
    ServingState,
    Target,
    read_state,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.generations.deployment import build, deploy
from candlefire_pipeline_tests.operations.backup.steps import backed_up, command, lose_data_dir

#: every test here starts an embedded Postgres of its own
pytestmark = pytest.mark.server


def test_a_generation_promoted_after_the_backup_is_rebuilt_before_it_serves(
    deployment, monkeypatch, capsys
):

    root = deployment.data_dir.parent
    settings = deploy(monkeypatch, root, EmbeddedPostgres(deployment.pg_data_dir).dsn)
    monkeypatch.delenv("CANDLEFIRE_PG_DSN")  # the same server, as the embedded one
    settings = Settings.from_env()
    backed_up(settings, capsys)
    generation = create_generation(settings, "dim48", "hashing-v1:48")
    build(settings, generation)
    view = generation_settings(settings, generation)
    # the switch as `promote --generation dim48` leaves it (its evidence is not under test)
    promoted = ServingState(PROMOTED, datetime.now(UTC).isoformat(), "c1", "serve dim48",
                            "oncall", "promote_generation", generation="dim48",
                            previous=Target("pgvector", "default"))  # fmt: skip
    write_atomic(settings.serving_file, promoted.to_json())
    lose_data_dir(settings)
    # without its batch files the generation cannot be rebuilt: the restore refuses to serve it
    aside = view.batches_dir.with_name("batches.aside")
    view.batches_dir.rename(aside)
    code, _, err = command(capsys, "restore")
    assert code == 2 and "the switch serves pgvector/dim48 but the restored store" in err
    assert not settings.pg_data_dir.exists()  # nothing half-restored was put in place
    aside.rename(view.batches_dir)
    code, out, err = command(capsys, "restore")
    assert code == 0, err
    assert "dim48: " in out and "(history row recorded)" in out
    with opened_backend("pgvector", view) as store:
        assert store.chunk_hashes() == expected_chunks(view.batches_dir) != {}
    assert read_state(settings.serving_file) == promoted  # the switch file is the truth
    latest = history(EmbeddedPostgres(settings.pg_data_dir).dsn, limit=1)[0]
    assert (latest["event"], latest["generation"], latest["state"]) == (
        "restored", "dim48", PROMOTED)  # fmt: skip
