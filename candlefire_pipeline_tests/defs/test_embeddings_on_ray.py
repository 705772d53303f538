"""CANDLEFIRE_EMBED_EXECUTOR=ray through the Dagster assets: same files as in-process, or a clear
failure that writes nothing when the cluster is unreachable."""

from __future__ import annotations

import dagster as dg
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.embedding import EmbeddingCache
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata, pipeline_env

MODEL = "hashing-v1:32"


def _on_ray(monkeypatch, address: str) -> None:
    monkeypatch.setenv("CANDLEFIRE_EMBED_EXECUTOR", "ray")
    monkeypatch.setenv("RAY_ADDRESS", address)
    monkeypatch.setenv("CANDLEFIRE_RAY_CPUS_PER_ACTOR", "0.5")
    monkeypatch.setenv("CANDLEFIRE_RAY_SLICE_TEXTS", "7")


def _ingest_first_drop(tmp_path, monkeypatch, pg_dsn, name: str) -> tuple[Settings, list]:
    settings = pipeline_env(monkeypatch, tmp_path / name, pg_dsn, model=MODEL)
    key = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path / name)) as instance:
        pipeline = Pipeline(instance)
        results = [pipeline.ingest(key), pipeline.ingest(key)]
    return settings, [key, *results]


def test_ingest_on_ray_writes_the_in_process_embeddings(tmp_path, monkeypatch, pg_dsn, ray_cluster):
    local, (key, first_local, _) = _ingest_first_drop(tmp_path, monkeypatch, pg_dsn, "local")
    _on_ray(monkeypatch, ray_cluster.address)
    remote, (_, first, again) = _ingest_first_drop(tmp_path, monkeypatch, pg_dsn, "ray")

    meta, meta_local = metadata(first, "embeddings"), metadata(first_local, "embeddings")
    assert (meta["executor"], meta_local["executor"]) == ("ray", "in_process")
    assert meta["model_id"] == meta_local["model_id"] == MODEL
    assert meta["embedded"] == meta_local["embedded"] > 0
    assert (metadata(again, "embeddings")["embedded"], again.success) == (0, True)
    on_ray = pq.read_table(remote.batch_dir(key) / "embeddings.parquet")
    in_process = pq.read_table(local.batch_dir(key) / "embeddings.parquet")
    assert on_ray.equals(in_process)  # hashing vectors are exact: same rows, order and model
    assert metadata(first, "pgvector_chunks")["rows_written"] == on_ray.num_rows


def test_unreachable_ray_fails_naming_the_address_and_writes_nothing(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model=MODEL)
    address = f"127.0.0.1:{procs.free_port()}"  # nothing listens there
    _on_ray(monkeypatch, address)
    key = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = Pipeline(instance).ingest(key, raise_on_error=False)

    assert not result.success
    (failure,) = [e for e in result.get_step_failure_events() if e.step_key == "embeddings"]
    message = failure.step_failure_data.error.message
    assert f"RAY_ADDRESS={address}" in message and "unreachable" in message
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"papers", "chunks"}
    batch = settings.batch_dir(key)
    assert not (batch / "embeddings.parquet").exists()
    assert not list(batch.glob("*.tmp"))
    assert EmbeddingCache(settings.cache_dir / "embeddings.sqlite").count() == 0
