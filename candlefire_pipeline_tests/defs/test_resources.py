"""Resources read the settings once per run, and every new run sees the environment anew."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline import settings as settings_module
from candlefire_pipeline.defs.resources import (
    ChromaResource,
    PgVectorResource,
    PipelineResource,
    QdrantResource,
)
from candlefire_pipeline.settings import Settings


@pytest.fixture
def reads(monkeypatch, tmp_path) -> list[str]:
    """Counts Settings.from_env calls (each one parses the whole environment)."""
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    calls: list[str] = []
    original = Settings.from_env.__func__

    def counted(cls, parity: bool = True) -> Settings:
        calls.append("read")
        return original(cls, parity)

    monkeypatch.setattr(Settings, "from_env", classmethod(counted))
    return calls


@dg.asset
def probe(
    pipeline: PipelineResource,
    pgvector: PgVectorResource,
    chroma: ChromaResource,
    qdrant: QdrantResource,
) -> dg.MaterializeResult:
    for resource in (pipeline, pgvector, chroma, qdrant):
        assert resource.settings() is resource.settings()  # one Settings object per run
    return dg.MaterializeResult(
        metadata={
            "model_id": pipeline.settings().model_id,
            "pg_table": pgvector.settings().pg_table,
            "chroma_collection": chroma.settings().chroma_collection,
        }
    )


def _run(instance, resources) -> dict:
    result = dg.materialize([probe], resources=resources, instance=instance)
    assert result.success
    events = result.get_asset_materialization_events()
    return {k: v.value for k, v in events[0].materialization.metadata.items()}


def test_each_run_reads_the_settings_once_per_resource_and_sees_env_changes(reads, monkeypatch):
    resources = {
        "pipeline": PipelineResource(),
        "pgvector": PgVectorResource(),
        "chroma": ChromaResource(collection="from_config"),
        "qdrant": QdrantResource(),
    }
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1")
    with dg.instance_for_test() as instance:
        first = _run(instance, resources)
        assert len(reads) == 4  # one read per resource, however often each was asked
        monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1-16")
        monkeypatch.setenv("CANDLEFIRE_PG_TABLE", "other_chunks")
        second = _run(instance, resources)
    assert len(reads) == 8
    assert first == {
        "model_id": "hashing-v1",
        "pg_table": "chunks",
        "chroma_collection": "from_config",  # a resource field wins over the environment
    }
    assert second == {
        "model_id": "hashing-v1-16",
        "pg_table": "other_chunks",
        "chroma_collection": "from_config",
    }


def test_a_resource_used_outside_a_run_keeps_what_it_read(reads, monkeypatch):
    resource = PipelineResource(model_id="configured-model")
    assert resource.settings().model_id == "configured-model"
    monkeypatch.setenv("CANDLEFIRE_PG_TABLE", "changed_later")
    assert resource.settings().pg_table == "chunks"
    assert len(reads) == 1


def test_the_code_location_reads_its_settings_once_per_process(monkeypatch):
    settings_module.code_location_settings.cache_clear()
    try:
        first = settings_module.code_location_settings()
        monkeypatch.setenv("CANDLEFIRE_PG_TABLE", "not_seen")
        assert settings_module.code_location_settings() is first
    finally:
        settings_module.code_location_settings.cache_clear()
