"""The embedding asset's code version names the model, so a model change marks the stores stale."""

import json
from dataclasses import replace

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from candlefire_pipeline.defs.ingest_assets import build_embeddings, chunks, embeddings, papers
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.defs.stores.assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.versions import embedding_code_version
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env

DROP = "0001-versions.jsonl"


@pytest.mark.parametrize(
    ("model_a", "model_b", "same"),
    [
        ("hashing-v1", "hashing-v1", True),
        ("sentence-transformers/all-MiniLM-L6-v2", "FremyCompany/BioLORD-2023-C", False),
        ("hashing-v1", "/models/hashing-v1", False),
    ],
)
def test_the_code_version_changes_exactly_when_the_model_does(model_a, model_b, same):
    base = Settings.from_env()
    a = embedding_code_version(replace(base, model_id=model_a))
    b = embedding_code_version(replace(base, model_id=model_b))
    assert (a == b) is same
    assert f"model={model_a}" in a


def test_the_defined_asset_carries_the_configured_models_version():
    (spec,) = embeddings.specs
    assert spec.code_version == embedding_code_version(Settings.from_env())


def _assets(code_version: str) -> list:
    return [papers, chunks, build_embeddings(code_version), pgvector_chunks, chroma_chunks]


def _status(instance, code_version: str, asset: str) -> StaleStatus:
    resolver = get_stale_status_resolver(instance, _assets(code_version))
    return resolver.get_status(dg.AssetKey(asset), DROP)


def _materialize(instance, code_version: str, selection=None) -> None:
    assets = _assets(code_version)
    result = dg.materialize(
        assets,
        selection=selection,
        instance=instance,
        resources=build_resources(Settings.from_env()),
        partition_key=DROP,
    )
    assert result.success


def test_a_model_change_marks_embeddings_stale_then_both_stores(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    record = {"pmid": "901", "title": "SOD1", "abstract": "SOD1 in ALS."}
    (settings.drops_dir / DROP).write_text(json.dumps(record) + "\n")
    before = embedding_code_version(settings)
    after = embedding_code_version(replace(settings, model_id="another-model"))
    stores = ("pgvector_chunks", "chroma_chunks")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("ingest_batches", [DROP])
        _materialize(instance, before)
        assert {_status(instance, before, a) for a in ("embeddings", *stores)} == {
            StaleStatus.FRESH
        }
        # the model changes: the UI marks the embeddings stale (a new code version) ...
        assert _status(instance, after, "embeddings") == StaleStatus.STALE
        assert _status(instance, after, "chunks") == StaleStatus.FRESH  # upstream is untouched
        # ... and once they are re-embedded, both stores (a new upstream data version)
        _materialize(instance, after, selection=["embeddings"])
        assert _status(instance, after, "embeddings") == StaleStatus.FRESH
        assert {_status(instance, after, a) for a in stores} == {StaleStatus.STALE}
        # re-embedding with an unchanged model changes nothing downstream
        _materialize(instance, after, selection=list(stores))
        _materialize(instance, after, selection=["embeddings"])
        assert {_status(instance, after, a) for a in stores} == {StaleStatus.FRESH}
