"""Fault: the embedding model changes to one of another dimension; nothing may be written."""

from __future__ import annotations

import json

import dagster as dg
import numpy as np
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, materialized, pipeline_env
from candlefire_pipeline_tests.reliability.helpers import paper_rows

PMIDS = [str(n) for n in range(1, 21)]


def test_a_batch_of_another_dimension_is_refused_before_any_write(backend):
    backend.replace_papers(paper_rows(PMIDS, "v1", dim=64, model_id="model-64"))
    before, count = backend.chunk_hashes(), backend.count()
    update = paper_rows([*PMIDS, "99"], "v2", sections=2, dim=32, model_id="model-32")
    with pytest.raises(DimensionMismatchError, match="model-64.*64-dim.*model-32.*32-dim"):
        backend.replace_papers(update)
    with pytest.raises(DimensionMismatchError):
        backend.ensure_schema("model-32", 32)
    with pytest.raises(DimensionMismatchError):
        backend.semantic_candidates(np.ones((1, 32), np.float32), 5)
    with pytest.raises(DimensionMismatchError):  # the serving side refuses the new model too
        Retriever(backend, HashingEmbedder(dim=32, model_id="model-32"))
    assert backend.chunk_hashes() == before and backend.count() == count
    assert backend.stored_model() == ("model-64", 64)


def test_same_dimension_but_another_model_is_refused_too(backend):
    """Same width, different vector space: as wrong as a new dimension (cosine is meaningless)."""
    backend.replace_papers(paper_rows(PMIDS, "v1", dim=32, model_id="model-a"))
    before = backend.chunk_hashes()
    with pytest.raises(DimensionMismatchError, match="model-a"):
        backend.replace_papers(paper_rows(PMIDS, "v2", dim=32, model_id="model-b"))
    assert backend.chunk_hashes() == before


def _drop(settings: Settings, key: str, version: str, pmids: list[str]) -> None:
    records = [
        {"pmid": p, "title": f"Paper {p} {version}", "abstract": f"{version} findings of {p}."}
        for p in pmids
    ]
    (settings.drops_dir / key).write_text("".join(json.dumps(r) + "\n" for r in records))


def _stores(settings: Settings) -> dict[str, tuple[int, dict[str, str], tuple | None]]:
    out = {}
    for name in STORE_NAMES:
        backend = open_backend(name, settings)
        try:
            out[name] = (backend.count(), backend.chunk_hashes(), backend.stored_model())
        finally:
            backend.close()
    return out


def _failure_text(result: dg.ExecuteInProcessResult, step: str) -> str:
    for event in result.get_step_failure_events():
        if event.step_key == step:
            error = event.step_failure_data.error
            parts = []
            while error is not None:
                parts.append(f"{error.cls_name}: {error.message}")
                error = error.cause
            return "\n".join(parts)
    raise AssertionError(f"step {step} did not fail")


def test_pipeline_refuses_a_new_dimension_and_leaves_both_stores_unchanged(
    tmp_path, monkeypatch, pg_dsn
):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model="hashing-v1:64")
    _drop(settings, "0001-first.jsonl", "v1", PMIDS)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest("0001-first.jsonl").success
        before = _stores(settings)
        assert {before[name][2] for name in STORE_NAMES} == {("hashing-v1:64", 64)}

        monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1:32")
        _drop(settings, "0002-second.jsonl", "v2", [*PMIDS[:10], "99"])
        result = pipeline.ingest("0002-second.jsonl", raise_on_error=False)

    assert not result.success
    assert materialized(result, "embeddings")  # a parquet file per model is harmless
    for step in [f"{name}_chunks" for name in STORE_NAMES]:
        assert not materialized(result, step)
        text = _failure_text(result, step)
        assert "DimensionMismatchError" in text and "rebuild the store" in text
        assert "hashing-v1:64" in text and "hashing-v1:32" in text
    assert _stores(settings) == before
