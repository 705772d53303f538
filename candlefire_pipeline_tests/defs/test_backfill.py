"""Many drop files: range runs (what the backfill policy makes) in any order converge to the
stores that one run per drop, in file-name order, builds."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.backfill_daemon import (
    RANGE_END,
    RANGE_START,
    BackfillDaemon,
    store_hashes,
)
from candlefire_pipeline_tests.defs.many_drops import write_many_drops
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata, pipeline_env

DROPS = 20
PER_RUN = 5


@pytest.fixture(scope="module")
def one_by_one(tmp_path_factory, pg_dsn) -> dict[str, str]:
    """chunk id -> content hash after one run per drop in file-name order: the reference."""
    root = tmp_path_factory.mktemp("one_by_one")
    with pytest.MonkeyPatch.context() as patch:
        settings = pipeline_env(patch, root / "data", pg_dsn)
        keys = write_many_drops(settings.drops_dir, count=DROPS)
        with dg.instance_for_test(temp_dir=str(root)) as instance:
            pipeline = Pipeline(instance)
            for key in keys:
                assert pipeline.ingest(key).success
        stores = store_hashes(settings)
        ledger = expected_chunks(settings.batches_dir)
    assert stores == {name: ledger for name in STORE_NAMES}
    assert len(ledger) > 30
    return ledger


def test_range_runs_newest_first_converge_to_one_by_one(tmp_path, monkeypatch, pg_dsn, one_by_one):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    keys = write_many_drops(settings.drops_dir, count=DROPS)
    ranges = [keys[i : i + PER_RUN] for i in range(0, DROPS, PER_RUN)][::-1]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(ingest_batches.name, keys)
        pipeline = Pipeline(instance)
        for batch in ranges:
            result = pipeline.ingest_range(batch[0], batch[-1])
            assert result.success
            assert metadata(result, "embeddings")["batches"] == PER_RUN
            assert metadata(result, "pgvector_chunks")["batches"] == PER_RUN
            checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
            assert checks and all(checks.values()), checks

    assert store_hashes(settings) == {name: one_by_one for name in STORE_NAMES}
    applied = StoreLedger(settings.batches_dir, "pgvector").applied()
    assert sorted(applied, key=applied.get)[:PER_RUN] == keys[-PER_RUN:]  # newest went first


def test_a_range_run_handles_its_batches_in_file_name_order(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    keys = write_many_drops(settings.drops_dir, count=PER_RUN)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        # registered out of file-name order: the range follows registration, the apply does not
        instance.add_dynamic_partitions(ingest_batches.name, keys[::-1])
        result = Pipeline(instance).ingest_range(keys[-1], keys[0])
    assert result.success
    applied = StoreLedger(settings.batches_dir, "chroma").applied()
    assert sorted(applied, key=applied.get) == keys
    assert store_hashes(settings)["chroma"] == expected_chunks(settings.batches_dir)


@pytest.mark.slow
def test_backfills_through_the_daemon_queue_and_pools_converge(pg_dsn, one_by_one, monkeypatch):
    """Two backfills, newest drops first, through `dagster dev`'s daemon: range runs per the
    backfill policy, all queued, one store-writing run at a time although the queue allows two."""
    with procs.scratch_dir("backfill") as root:
        keys = write_many_drops(root / "data" / "drops", count=DROPS)
        daemon = BackfillDaemon(root, pg_dsn, per_run=PER_RUN, max_concurrent_runs=2)
        monkeypatch.setenv("DAGSTER_HOME", str(daemon.home))  # dagster.yaml roots storage there
        with daemon.running() as dev:
            newer = daemon.backfill(dev, keys[DROPS // 2 :], runs=DROPS // 2 // PER_RUN)
            older = daemon.backfill(dev, keys[: DROPS // 2], runs=DROPS // 2 // PER_RUN)
            daemon.wait_done(dev, [newer, older])
        runs = daemon.runs(newer) + daemon.runs(older)
        hashes = daemon.store_hashes()
        applied = StoreLedger(root / "data" / "batches", "pgvector").applied()
        enqueued = [daemon.enqueued(r.dagster_run.run_id) for r in runs]

    assert [r.dagster_run.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * len(runs)
    assert len(runs) == DROPS // PER_RUN  # the backfill policy: PER_RUN drop files per run
    tags = [r.dagster_run.tags for r in runs]
    ranges = sorted((t[RANGE_START], t[RANGE_END]) for t in tags)
    assert ranges == [(keys[i], keys[i + PER_RUN - 1]) for i in range(0, DROPS, PER_RUN)]
    assert all(enqueued)  # every run went through the queue
    spans = sorted((r.start_time, r.end_time) for r in runs)
    overlaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1]]
    assert not overlaps, spans  # the pools, not the queue (which allows 2), kept them apart
    assert set(sorted(applied, key=applied.get)[: DROPS // 2]) == set(keys[DROPS // 2 :])
    assert hashes == {name: one_by_one for name in STORE_NAMES}
