"""Generations in the code location: their own assets, lineage and blocking checks; every new
drop feeds every live generation in the same run; a build resumes from the ledger."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.definitions import build_definitions
from candlefire_pipeline.defs.generations.build import build_generation, ranges
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.generations.batches import behind
from candlefire_pipeline.generations.identity import DROPPED, IndexLayout
from candlefire_pipeline.generations.registry import (
    Registry,
    registry_lock,
    stored_registry,
    write_registry,
)
from candlefire_pipeline.generations.view import batches_dir, generation_settings
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import drop_tables

FEED = ["embeddings", "pgvector_chunks", "chroma_chunks", "qdrant_chunks"]


@pytest.fixture
def located(tmp_path, monkeypatch, pg_dsn):
    """A deployment with generation dim32 (hashing-v1:32, halfvec), its drops registered."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model="hashing-v1")
    generation = create_generation(
        settings, "dim32", "hashing-v1:32", layout=IndexLayout("halfvec")
    )
    keys = [d.name for d in write_demo_drops(settings.drops_dir)]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(ingest_batches.name, keys)
    yield settings, generation, build_definitions(Settings.from_env()), instance, keys
    drop_tables(settings)


def _keys(defs) -> set[str]:
    return {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}


def test_each_generation_has_its_own_assets_checks_and_build_job(located):
    settings, generation, defs, _, _ = located
    keys = _keys(defs)
    assert {f"dim32/{name}" for name in [*FEED, "parity_report"]} <= keys
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey(["dim32", "embeddings"])).parent_keys == {dg.AssetKey("chunks")}
    assert graph.get(dg.AssetKey(["dim32", "embeddings"])).group_name == "generation_dim32"
    specs = {(s.asset_key.to_user_string(), s.key.name, s.blocking)
             for c in defs.asset_checks for s in c.check_specs}  # fmt: skip
    assert ("dim32/qdrant_chunks", "qdrant_holds_current_versions", True) in specs
    assert ("dim32/chroma_chunks", "chroma_agrees_with_pgvector", True) in specs
    assert ("dim32/parity_report", "rankings_hold", True) in specs
    # its report refreshes after new partitions, evaluated by the same sensor as the default's
    report = dg.AssetKey(["dim32", "parity_report"])
    assert graph.get(report).automation_condition is not None
    sensor = defs.resolve_sensor_def("parity_automation_sensor")
    assert report in sensor.asset_selection.resolve(graph)
    ingest = defs.resolve_job_def("ingest_job").asset_layer.asset_graph.get_all_asset_keys()
    ingest = {k.to_user_string() for k in ingest}
    assert {f"dim32/{name}" for name in FEED} <= ingest and "dim32/parity_report" not in ingest
    build = defs.resolve_job_def("generation_dim32_build").asset_layer.asset_graph
    assert {k.to_user_string() for k in build.get_all_asset_keys()} >= {
        f"dim32/{name}" for name in FEED
    }
    # without a registry the code location is exactly what it was
    settings.generations_file.unlink()
    assert not any("dim32" in key for key in _keys(build_definitions(Settings.from_env())))


def test_every_new_drop_feeds_every_live_generation_in_the_same_run(located):
    settings, generation, defs, instance, keys = located
    job = defs.resolve_job_def("ingest_job")
    for key in keys:
        result = job.execute_in_process(partition_key=key, instance=instance)
        assert result.success
        done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
        assert {"pgvector_chunks", "dim32/pgvector_chunks", "dim32/qdrant_chunks"} <= done
        checks = result.get_asset_check_evaluations()
        assert checks and all(c.passed for c in checks)
        assert any(c.asset_key == dg.AssetKey(["dim32", "chroma_chunks"]) for c in checks)
    view = generation_settings(settings, generation)
    for store in settings.stores:
        backend = open_backend(store, view)
        try:
            assert backend.stored_model() == ("hashing-v1:32", 32)
            assert backend.chunk_hashes() == expected_chunks(batches_dir(settings, generation))
        finally:
            backend.close()
    assert behind(settings, generation, settings.stores) == {s: [] for s in settings.stores}


def test_the_build_runs_only_what_its_ledger_lacks_and_resumes(located):
    settings, generation, defs, instance, keys = located
    graph = defs.resolve_asset_graph()
    default_only = list(dg.AssetSelection.groups("ingest", "stores").resolve(graph))
    for key in keys:  # the drops went through the pipeline before the generation existed
        result = defs.resolve_job_def("ingest_job").execute_in_process(
            partition_key=key, instance=instance, asset_selection=default_only
        )
        assert result.success
    said: list[str] = []
    # a first build stopped after its first run (as if killed): only that drop is in the ledger
    first = ranges(instance.get_dynamic_partitions(ingest_batches.name), set(keys), 1)[0]
    job = defs.resolve_job_def("generation_dim32_build")
    assert job.execute_in_process(partition_key=first[0], instance=instance).success
    assert sorted({k for ks in behind(settings, generation, settings.stores).values()
                   for k in ks}) == keys[1:]  # fmt: skip
    assert build_generation(settings, generation, 1, defs, said.append, instance) == 0
    assert said[0] == "generation dim32: 2 drops to build in 2 runs"
    assert behind(settings, generation, settings.stores) == {s: [] for s in settings.stores}
    assert build_generation(settings, generation, 1, defs, said.append, instance) == 0
    assert "every ingested drop is applied to every store" in said[-1]


def test_a_dropped_generation_writes_nothing_until_the_location_reloads(located):
    settings, generation, defs, instance, keys = located
    with registry_lock(settings):
        registry = stored_registry(settings)
        dropped = generation.with_state(DROPPED, dropped_at="now")
        write_registry(settings, Registry(registry.replaced(dropped).generations, True))
    result = defs.resolve_job_def("ingest_job").execute_in_process(
        partition_key=keys[0], instance=instance, raise_on_error=False
    )
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failures and all("dim32" in e.step_key for e in failures)
    assert "is dropped, not live" in failures[0].event_specific_data.error.message
    assert not batches_dir(settings, generation).exists()
    backend = open_backend("pgvector", generation_settings(settings, generation))
    assert backend.stored_model() is None  # its table was never created
    backend.close()


@pytest.mark.parametrize(
    "ordered, wanted, per_run, expected",
    [
        (["a", "b", "c", "d"], {"a", "b", "c", "d"}, 2, [["a", "b"], ["c", "d"]]),
        (["a", "b", "c", "d"], {"a", "c", "d"}, 10, [["a"], ["c", "d"]]),
        (["d", "a", "c"], {"a", "c", "d"}, 2, [["d", "a"], ["c"]]),  # the partitions' order
        (["a"], set(), 5, []),
    ],
)
def test_build_ranges_are_contiguous_in_partition_order(ordered, wanted, per_run, expected):
    assert ranges(ordered, wanted, per_run) == expected
