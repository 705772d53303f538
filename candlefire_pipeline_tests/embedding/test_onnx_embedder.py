"""ONNX Runtime embeddings: agreement with torch, dimension from the model, no torch import."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from candlefire_pipeline.embedding import Embedder, load_embedder
from candlefire_pipeline.embedding.onnx_embedder import OnnxEmbedder, token_batches
from candlefire_pipeline.settings import DEFAULT_MODEL_ID
from candlefire_pipeline_tests.embedding.test_embedders import ALS_TEXTS
from candlefire_pipeline_tests.embedding.tiny_model import TINY_DIM

SAMPLE = 160


@pytest.fixture(scope="module")
def scifact_sample(shared_data) -> list[str]:
    """A seeded sample of SciFact abstracts in the chunker's abstract-only document format."""
    with (shared_data / "scifact" / "corpus.jsonl").open() as fh:
        records = [json.loads(line) for line in fh]
    picked = random.Random(14).sample(records, SAMPLE)
    return [f"{r['title']}\n{' '.join(r.get('mesh_terms') or [])}\n{r['abstract']}" for r in picked]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_vectors_agree_with_torch_on_scifact(minilm, minilm_onnx, scifact_sample):
    values = cosines(minilm_onnx.embed(scifact_sample), minilm.embed(scifact_sample))
    assert values.mean() >= 0.9999
    assert values.min() >= 0.999


def test_onnx_shares_the_torch_identity_and_reads_its_dimension(minilm, minilm_onnx):
    assert isinstance(minilm_onnx, Embedder)
    assert minilm_onnx.model_id == minilm.model_id == DEFAULT_MODEL_ID
    assert minilm_onnx.dim == 384 == minilm_onnx.artifact.manifest["dim"]
    assert minilm_onnx.session.get_outputs()[0].shape[-1] == 384
    assert minilm_onnx.artifact.manifest["agreement"]["mean_cosine"] >= 0.9999


def test_onnx_rows_are_unit_norm_float32_and_padding_free(minilm, minilm_onnx):
    batched = minilm_onnx.embed(ALS_TEXTS)
    single = np.vstack([minilm_onnx.embed([text]) for text in ALS_TEXTS])
    assert batched.dtype == np.float32 and batched.shape == (len(ALS_TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(batched, single, atol=1e-5)
    # the 500-word text is cut at max_seq_length exactly like sentence-transformers does
    assert cosines(batched, minilm.embed(ALS_TEXTS)).min() >= 0.9999


def test_onnx_embeds_empty_input_as_zero_rows(minilm_onnx):
    assert minilm_onnx.embed([]).shape == (0, 384)


def test_onnx_batch_size_splits_requests_without_changing_vectors(minilm_onnx, onnx_dir):
    small = OnnxEmbedder(DEFAULT_MODEL_ID, onnx_dir, batch_size=2)
    np.testing.assert_allclose(small.embed(ALS_TEXTS), minilm_onnx.embed(ALS_TEXTS), atol=1e-5)
    with pytest.raises(ValueError, match="batch_size"):
        OnnxEmbedder(DEFAULT_MODEL_ID, onnx_dir, batch_size=0)


def test_a_768_dim_mpnet_model_takes_the_same_path(mpnet_768, onnx_dir):
    onnx = load_embedder(str(mpnet_768), runtime="onnx", onnx_dir=onnx_dir)
    torch = load_embedder(str(mpnet_768), runtime="torch")
    assert onnx.dim == torch.dim == TINY_DIM
    assert onnx.model_id == torch.model_id == "mpnet-768"
    assert onnx.artifact.manifest["inputs"] == ["input_ids", "attention_mask"]
    assert cosines(onnx.embed(ALS_TEXTS), torch.embed(ALS_TEXTS)).min() >= 0.9999


def test_int8_is_its_own_identity_close_to_but_not_fp32(minilm, minilm_int8, scifact_sample):
    assert minilm_int8.model_id == f"{DEFAULT_MODEL_ID}@onnx-int8"
    assert minilm_int8.dim == 384
    values = cosines(minilm_int8.embed(scifact_sample[:40]), minilm.embed(scifact_sample[:40]))
    assert values.mean() >= 0.98
    assert values.mean() < 0.9999  # quantized vectors really differ: never mixed with fp32


@pytest.mark.parametrize("runtime", ["tensorflow", "ONNX", ""])
def test_load_embedder_rejects_an_unknown_runtime(runtime, onnx_dir):
    with pytest.raises(ValueError, match="runtime"):
        load_embedder(DEFAULT_MODEL_ID, runtime=runtime, onnx_dir=onnx_dir)


def test_onnx_needs_an_export_dir():
    with pytest.raises(ValueError, match="onnx_dir"):
        load_embedder(DEFAULT_MODEL_ID, runtime="onnx")


def test_the_onnx_paths_never_import_torch(minilm_onnx, onnx_dir, tmp_path):
    """Query and bulk paths in a fresh process: torch and its model stack stay unimported."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import pyarrow.parquet as pq
        from candlefire_pipeline.backends.memory import MemoryBackend
        from candlefire_pipeline.embedding import EmbeddingCache, load_embedder, write_embeddings
        from candlefire_pipeline.retrieval.retriever import Retriever
        from candlefire_pipeline.settings import DEFAULT_MODEL_ID
        from candlefire_pipeline_tests.embedding.helpers import chunk_rows

        tmp = Path({str(tmp_path)!r})
        embedder = load_embedder(DEFAULT_MODEL_ID, runtime="onnx", onnx_dir=Path({str(onnx_dir)!r}))
        pq.write_table(chunk_rows(["SOD1 and ALS", "TDP-43 in motor neurons"]), tmp / "c.parquet")
        summary = write_embeddings(
            tmp / "c.parquet", tmp / "e.parquet", embedder, EmbeddingCache(tmp / "cache.sqlite")
        )
        assert summary.embedded == 2 and summary.runtime == "onnx", summary
        Retriever(MemoryBackend(), embedder).retrieve("tofersen", entity_names=["SOD1"])
        heavy = sorted(
            m for m in sys.modules
            if m.split(".")[0] in ("torch", "transformers", "sentence_transformers")
        )
        print("HEAVY", heavy)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HEAVY []" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("lengths", "max_texts", "max_tokens", "groups"),
    [
        ([], 4, 100, []),
        ([5] * 13, 64, 4096, [range(0, 13)]),  # a query + 12 names: one call
        ([256] * 40, 64, 4096, [range(0, 16), range(16, 32), range(32, 40)]),
        ([10] * 10, 4, 4096, [range(0, 4), range(4, 8), range(8, 10)]),
        ([300, 10, 10], 8, 200, [range(0, 1), range(1, 3)]),  # over budget alone: still embedded
        ([10, 10, 90], 8, 100, [range(0, 2), range(2, 3)]),  # padding to 90 would cost 270
    ],
)
def test_token_batches_bound_padded_tokens(lengths, max_texts, max_tokens, groups):
    result = token_batches(lengths, max_texts, max_tokens)
    assert result == groups
    assert [i for g in result for i in g] == list(range(len(lengths)))


def test_a_small_token_budget_changes_no_vector(minilm_onnx, onnx_dir):
    tight = OnnxEmbedder(DEFAULT_MODEL_ID, onnx_dir, max_tokens=64)
    np.testing.assert_allclose(tight.embed(ALS_TEXTS), minilm_onnx.embed(ALS_TEXTS), atol=1e-5)
    assert minilm_onnx.max_tokens == 16 * 256
