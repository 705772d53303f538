"""Store writes: retried with backoff on a connection error, failed at once on a data error;
each store asset in its own concurrency pool, limited by the instance config."""

import json
import socket
import threading
from pathlib import Path

import dagster as dg
import yaml

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.defs.stores.assets import chroma_chunks, pgvector_chunks, qdrant_chunks
from candlefire_pipeline.defs.stores.policies import (
    CHROMA_POOL,
    POSTGRES_POOL,
    QDRANT_POOL,
    STORE_WRITE_RETRY,
)
from candlefire_pipeline.settings import REPO_ROOT, Settings
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, materialized, pipeline_env
from candlefire_pipeline_tests.reliability.helpers import ChromaServer

DROP = "0001-retry.jsonl"
RECORDS = [
    {"pmid": "701", "title": "SPG302 in ALS", "abstract": "SPG302 restores synapses."},
    {"pmid": "702", "title": "TDP-43", "abstract": "TDP-43 aggregates in motor neurons."},
]


def _write_drop(settings: Settings) -> None:
    (settings.drops_dir / DROP).write_text("".join(json.dumps(r) + "\n" for r in RECORDS))


def _drop_first_connection_then_start(server: ChromaServer) -> threading.Thread:
    """Hang up on the first client that connects to the server's port, then start the server:
    the first attempt surely meets a connection error, a later one the real Chroma."""
    listener = socket.create_server((server.host, server.port), reuse_port=False)

    def run() -> None:
        with listener:
            connection, _ = listener.accept()
            connection.close()
        server.start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _events(result, step: str, kind: dg.DagsterEventType) -> list:
    return [e for e in result.all_events if e.step_key == step and e.event_type == kind]


def test_a_store_that_comes_up_late_is_retried_with_backoff_and_the_batch_lands(
    tmp_path, monkeypatch, pg_dsn
):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    _write_drop(settings)
    server = ChromaServer(tmp_path / "chroma", tmp_path / "chroma.log")
    monkeypatch.setenv("CANDLEFIRE_CHROMA_HOST", server.host)
    monkeypatch.setenv("CANDLEFIRE_CHROMA_PORT", str(server.port))
    starter = _drop_first_connection_then_start(server)
    try:
        with dg.instance_for_test() as instance:
            result = Pipeline(instance).ingest(DROP, raise_on_error=False)
        starter.join(timeout=60)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        assert materialized(result, "chroma_chunks")
        retries = _events(result, "chroma_chunks", dg.DagsterEventType.STEP_UP_FOR_RETRY)
        assert 1 <= len(retries) <= STORE_WRITE_RETRY.max_retries
        chroma = open_backend("chroma", Settings.from_env())
        try:
            assert chroma.count() == 2
        finally:
            chroma.close()
    finally:
        server.kill()


def test_a_dimension_mismatch_fails_at_once_without_a_retry(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    _write_drop(settings)
    chroma = open_backend("chroma", settings)
    try:
        chroma.ensure_schema("another-model", 8)  # the collection was built with another model
    finally:
        chroma.close()
    with dg.instance_for_test() as instance:
        result = Pipeline(instance).ingest(DROP, raise_on_error=False)
    assert not result.success
    assert not _events(result, "chroma_chunks", dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = _events(result, "chroma_chunks", dg.DagsterEventType.STEP_FAILURE)
    text = str(failure.event_specific_data.error)
    assert "DimensionMismatchError" in text and "not retried" in text
    assert materialized(result, "pgvector_chunks")  # the other store is not held back


def test_each_store_asset_writes_through_its_own_pool_with_the_retry_policy():
    pairs = (
        (pgvector_chunks, POSTGRES_POOL),
        (chroma_chunks, CHROMA_POOL),
        (qdrant_chunks, QDRANT_POOL),
    )
    for asset, pool in pairs:
        assert asset.op.pool == pool
        assert asset.op.retry_policy == STORE_WRITE_RETRY
    assert STORE_WRITE_RETRY.backoff == dg.Backoff.EXPONENTIAL


def test_the_local_instance_limits_every_pool_per_run(tmp_path, monkeypatch):
    from dagster._core.instance.config import PoolGranularity

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        config = instance.get_concurrency_config()
    assert config.pool_config.pool_granularity == PoolGranularity.RUN
    assert config.pool_config.default_pool_limit == 1
    assert config.run_queue_config.max_concurrent_runs == 1


def test_the_deploy_instance_blocks_runs_whose_pools_are_full():
    config = yaml.safe_load(Path(REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    queue = config["run_coordinator"]["config"]
    assert queue["block_op_concurrency_limited_runs"]["enabled"] is True
    assert "pools" not in config.get("concurrency", {})  # would forbid the env-driven queue size
