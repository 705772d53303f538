"""Building a generation from the UI: an asset backfill of its group through `dagster dev`'s
daemon, over drops the default generation already ingested."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline.generations.batches import behind
from candlefire_pipeline.generations.view import batches_dir, generation_settings
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.backfill_daemon import (
    RANGE_END,
    RANGE_START,
    BackfillDaemon,
    store_hashes,
)
from candlefire_pipeline_tests.defs.many_drops import write_many_drops
from candlefire_pipeline_tests.generations.deployment import drop_tables

DROPS, PER_RUN = 4, 2
FEED = ["embeddings", *(f"{name}_chunks" for name in STORE_NAMES)]


@pytest.mark.slow
def test_a_generation_builds_as_a_backfill_of_its_group(pg_dsn, monkeypatch):
    with procs.scratch_dir("generation-backfill") as root:
        keys = write_many_drops(root / "data" / "drops", count=DROPS)
        daemon = BackfillDaemon(root, pg_dsn, per_run=PER_RUN, max_concurrent_runs=1)
        for name, value in daemon.env.items():
            monkeypatch.setenv(name, value)
        settings = Settings.from_env()
        generation = create_generation(settings, "dim32", "hashing-v1:32")  # before the load
        try:
            with daemon.running() as dev:
                ingested = daemon.backfill(dev, keys, runs=DROPS // PER_RUN)
                daemon.wait_done(dev, [ingested])
                assert behind(settings, generation, STORE_NAMES)["pgvector"] == keys
                paths = [["dim32", name] for name in FEED]
                built = daemon.backfill(dev, keys, runs=DROPS // PER_RUN, assets=paths)
                daemon.wait_done(dev, [built])
            runs = daemon.runs(built)
            hashes = store_hashes(generation_settings(settings, generation))
            from candlefire_pipeline.corpus.ledger import expected_chunks

            expected = expected_chunks(batches_dir(settings, generation))
        finally:
            drop_tables(settings)
    assert [r.dagster_run.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * len(runs)
    spans = sorted((r.dagster_run.tags[RANGE_START], r.dagster_run.tags[RANGE_END]) for r in runs)
    assert spans == [(keys[i], keys[i + PER_RUN - 1]) for i in range(0, DROPS, PER_RUN)]
    assert len(expected) > 10 and hashes == {name: expected for name in STORE_NAMES}
    assert behind(settings, generation, STORE_NAMES) == {name: [] for name in STORE_NAMES}
