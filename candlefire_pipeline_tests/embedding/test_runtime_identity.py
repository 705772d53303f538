"""Runtime identity: fp32 torch/ONNX share one, int8 has its own; stores and caches never mix."""

from __future__ import annotations

import json
from dataclasses import replace

import dagster as dg
import numpy as np
import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.defs.versions import embedding_code_version
from candlefire_pipeline.embedding import EmbeddingCache, embedding_identity, write_embeddings
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, materialized, pipeline_env
from candlefire_pipeline_tests.embedding.test_stage import DOCUMENTS
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

INT8_ID = f"{DEFAULT_MODEL_ID}@onnx-int8"


@pytest.mark.parametrize(
    ("model_id", "runtime", "identity"),
    [
        (DEFAULT_MODEL_ID, "torch", DEFAULT_MODEL_ID),
        (DEFAULT_MODEL_ID, "onnx", DEFAULT_MODEL_ID),
        (DEFAULT_MODEL_ID, "onnx-int8", INT8_ID),
        ("FremyCompany/BioLORD-2023-C", "onnx-int8", "FremyCompany/BioLORD-2023-C@onnx-int8"),
        ("/models/BioLORD-2023-C", "onnx", "BioLORD-2023-C"),
    ],
)
def test_identity_per_runtime(model_id, runtime, identity):
    assert embedding_identity(model_id, runtime) == identity


@pytest.mark.parametrize(
    ("runtime_a", "runtime_b", "same"),
    [("torch", "onnx", True), ("onnx", "onnx-int8", False), ("torch", "onnx-int8", False)],
)
def test_the_embedding_code_version_follows_the_vectors(runtime_a, runtime_b, same):
    base = Settings.from_env()
    a, b = (
        embedding_code_version(replace(base, embed_runtime_query=r, embed_runtime_bulk=r))
        for r in (runtime_a, runtime_b)
    )
    assert (a == b) is same
    assert f"model={base.model_id}" in a


def test_an_unknown_runtime_has_no_identity():
    with pytest.raises(ValueError, match="runtime"):
        embedding_identity(DEFAULT_MODEL_ID, "fp16")


def test_fp32_runtimes_share_cache_entries_and_int8_does_not(
    tmp_path, chunks_file, minilm, minilm_onnx, minilm_int8
):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    chunks_path = chunks_file(DOCUMENTS)
    by_torch = write_embeddings(chunks_path, tmp_path / "torch.parquet", minilm, cache)
    by_onnx = write_embeddings(chunks_path, tmp_path / "onnx.parquet", minilm_onnx, cache)
    by_int8 = write_embeddings(chunks_path, tmp_path / "int8.parquet", minilm_int8, cache)
    assert (by_torch.embedded, by_onnx.embedded, by_int8.embedded) == (7, 0, 7)
    assert (by_onnx.runtime, by_int8.runtime) == ("onnx", "onnx-int8")
    assert cache.count(DEFAULT_MODEL_ID) == cache.count(INT8_ID) == len(DOCUMENTS)
    int8 = pq.read_table(tmp_path / "int8.parquet")
    assert set(int8["model_id"].to_pylist()) == {INT8_ID}
    fp32 = np.array(pq.read_table(tmp_path / "torch.parquet")["embedding"].to_pylist())
    fresh = minilm_onnx.embed(DOCUMENTS)
    assert np.min(np.sum(fp32 * fresh, axis=1)) >= 0.9999  # what sharing the entries relies on


def test_a_store_of_one_identity_refuses_the_other(backend, minilm, minilm_onnx, minilm_int8):
    chunks = [chunk(str(100 + i), document=doc) for i, doc in enumerate(DOCUMENTS)]
    backend.replace_papers(make_rows(chunks, minilm.embed(DOCUMENTS), model_id=minilm.model_id))
    int8_rows = make_rows(chunks, minilm_int8.embed(DOCUMENTS), model_id=minilm_int8.model_id)
    with pytest.raises(DimensionMismatchError, match=f"{DEFAULT_MODEL_ID}.*{INT8_ID}"):
        backend.replace_papers(int8_rows)
    with pytest.raises(DimensionMismatchError, match="onnx-int8"):
        Retriever(backend, minilm_int8)
    assert backend.stored_model() == (DEFAULT_MODEL_ID, 384)
    # fp32 ONNX queries the torch-built store: same identity, same neighbours
    query = "Riluzole extends survival in ALS"
    by_onnx = Retriever(backend, minilm_onnx).retrieve(query, terms=()).results  # semantic only
    by_torch = Retriever(backend, minilm).retrieve(query, terms=()).results
    assert [r["pmid"] for r in by_onnx] == [r["pmid"] for r in by_torch]
    assert by_onnx[0]["title"] == "Title of 104"


def _drop(settings: Settings, key: str, pmids: list[str]) -> None:
    records = [
        {"pmid": p, "title": f"ALS paper {p}", "abstract": f"SOD1 and TDP-43 findings of {p}."}
        for p in pmids
    ]
    (settings.drops_dir / key).write_text("".join(json.dumps(r) + "\n" for r in records))


def _store_models(settings: Settings) -> dict[str, tuple | None]:
    out = {}
    for name in ("pgvector", "chroma"):
        backend = open_backend(name, settings)
        try:
            out[name] = (backend.stored_model(), backend.count())
        finally:
            backend.close()
    return out


def test_the_pipeline_refuses_a_mixed_build_and_accepts_a_shared_identity(
    tmp_path, monkeypatch, pg_dsn, onnx_dir
):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model=DEFAULT_MODEL_ID)
    monkeypatch.setenv("CANDLEFIRE_ONNX_DIR", str(onnx_dir))
    monkeypatch.setenv("CANDLEFIRE_EMBED_RUNTIME", "onnx")
    _drop(settings, "0001-first.jsonl", ["1", "2", "3"])
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest("0001-first.jsonl").success
        built = _store_models(settings)
        assert set(built.values()) == {((DEFAULT_MODEL_ID, 384), 3)}

        monkeypatch.setenv("CANDLEFIRE_EMBED_RUNTIME", "onnx-int8")
        _drop(settings, "0002-int8.jsonl", ["4"])
        mixed = pipeline.ingest("0002-int8.jsonl", raise_on_error=False)
        assert not mixed.success
        assert not materialized(mixed, "pgvector_chunks")
        assert not materialized(mixed, "chroma_chunks")
        assert _store_models(settings) == built

        monkeypatch.setenv("CANDLEFIRE_EMBED_RUNTIME", "torch")  # fp32: the store's identity
        _drop(settings, "0003-torch.jsonl", ["5"])
        assert pipeline.ingest("0003-torch.jsonl").success
    assert set(_store_models(settings).values()) == {((DEFAULT_MODEL_ID, 384), 4)}
    written = pq.read_table(settings.batch_dir("0002-int8.jsonl") / "embeddings.parquet")
    assert set(written["model_id"].to_pylist()) == {INT8_ID}
