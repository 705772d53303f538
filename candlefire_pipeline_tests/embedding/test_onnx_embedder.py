"""ONNX Runtime embeddings: agreement with torch, dimension from the model, no torch import."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from candlefire_pipeline.embedding import Embedder, load_embedder
from candlefire_pipeline.embedding.length_groups import length_groups, padded_tokens
from candlefire_pipeline.embedding.onnx_embedder import OnnxEmbedder
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
        from candlefire_pipeline.backends.factory import build_backend
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
        Retriever(build_backend("memory"), embedder).retrieve("tofersen", entity_names=["SOD1"])
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


#: token counts of a real query-path request: a SciFact claim + 12 entity names
QUERY_AND_NAMES = [22, 9, 5, 7, 9, 7, 7, 6, 6, 8, 8, 6, 5]


@pytest.mark.parametrize(
    ("lengths", "max_texts", "max_tokens", "overhead", "groups"),
    [
        ([], 4, 100, 10, []),
        # the query goes alone; the names, sorted (ties in caller order), in two calls: padding
        # the five names of 5-7 tokens to 9 would cost more than a call (8x7 + 4x9 + 10 < 12x9)
        (QUERY_AND_NAMES, 64, 4096, 10, [[2, 12, 7, 8, 11, 3, 5, 6], [9, 10, 1, 4], [0]]),
        (QUERY_AND_NAMES, 64, 4096, 30, [[2, 12, 7, 8, 11, 3, 5, 6, 9, 10, 1, 4], [0]]),
        (QUERY_AND_NAMES, 64, 4096, 1e9, [[2, 12, 7, 8, 11, 3, 5, 6, 9, 10, 1, 4, 0]]),
        ([7] * 13, 64, 4096, 10, [list(range(13))]),  # equal lengths stay together
        ([7] * 13, 64, 4096, 0, [list(range(13))]),  # ... even when a call costs nothing
        ([5, 3, 5, 3], 8, 4096, 0, [[1, 3], [0, 2]]),  # free calls: one per distinct length
        ([40, 4, 4, 4], 8, 4096, 200, [[1, 2, 3, 0]]),  # a dear call: padding is cheaper
        ([300, 10, 10], 8, 200, 10, [[1, 2], [0]]),  # over budget alone: still embedded
        ([10, 10, 90], 8, 100, 10, [[0, 1], [2]]),  # padding to 90 would cost 270 > 100
        ([10] * 10, 4, 4096, 10, [[0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]),  # max_texts
        ([256] * 40, 64, 4096, 10, [list(range(8)), list(range(8, 24)), list(range(24, 40))]),
    ],
)
def test_length_groups_sort_and_split_by_cost(lengths, max_texts, max_tokens, overhead, groups):
    assert length_groups(lengths, max_texts, max_tokens, overhead) == groups


def _brute_force_cost(widths: list[int], max_texts: int, max_tokens: int, overhead: float):
    """The cheapest cost over all 2^(n-1) ways to cut ascending widths into feasible groups."""
    best = float("inf")
    for mask in range(2 ** max(0, len(widths) - 1)):
        cuts = [0, *[i + 1 for i in range(len(widths) - 1) if mask >> i & 1], len(widths)]
        groups = [widths[a:b] for a, b in itertools.pairwise(cuts)]
        if all(len(g) == 1 or len(g) <= max_texts and len(g) * g[-1] <= max_tokens for g in groups):
            best = min(best, sum(overhead + len(g) * g[-1] for g in groups))
    return best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("max_texts", "max_tokens", "overhead"), [(64, 4096, 10), (3, 40, 4)])
def test_length_groups_keep_bounds_and_find_the_cheapest_cut(seed, max_texts, max_tokens, overhead):
    rng = random.Random(seed)
    lengths = [rng.choice([2, 3, 5, 8, 13, 21, 60]) for _ in range(rng.randint(1, 11))]
    groups = length_groups(lengths, max_texts, max_tokens, overhead)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # each exactly once
    for group in groups:
        widths = [lengths[i] for i in group]
        assert widths == sorted(widths)
        assert len(group) == 1 or (
            len(group) <= max_texts and len(group) * widths[-1] <= max_tokens
        )
    cost = sum(overhead + len(g) * max(lengths[i] for i in g) for g in groups)
    assert cost == _brute_force_cost(sorted(lengths), max_texts, max_tokens, overhead)
    assert padded_tokens(lengths, groups) == cost - overhead * len(groups)


def test_bulk_chunks_keep_full_calls_and_never_cost_more_than_given_order():
    """Mostly full-length chunks: 16 a call as before, and no more cost than fixed batches."""
    rng = random.Random(3)
    lengths = [256] * 3000 + [rng.randint(20, 256) for _ in range(1000)]
    rng.shuffle(lengths)
    groups = length_groups(lengths, 64, 4096, 10)
    assert sorted(i for g in groups for i in g) == list(range(4000))
    full = [g for g in groups if all(lengths[i] == 256 for i in g)]
    assert sum(len(g) < 16 for g in full) <= 1 and sum(map(len, full)) >= 2990
    given_order = [list(range(i, min(i + 16, 4000))) for i in range(0, 4000, 16)]
    assert padded_tokens(lengths, groups) + 10 * len(groups) <= padded_tokens(
        lengths, given_order
    ) + 10 * len(given_order)


@pytest.mark.parametrize(
    ("max_texts", "max_tokens", "overhead"),
    [(0, 100, 10), (4, 0, 10), (4, 100, -1), (4, 100, float("nan"))],
)
def test_length_groups_reject_bad_bounds(max_texts, max_tokens, overhead):
    with pytest.raises(ValueError, match="must be >= "):
        length_groups([3, 4], max_texts, max_tokens, overhead)


def test_a_mixed_request_embeds_each_text_as_if_alone(minilm_onnx):
    """A query among short names, a long text and empties: split calls, caller's order kept."""
    names = ["SOD1", "TDP-43", "C9orf72", "FUS", "riluzole", "edaravone", "tofersen"]
    texts = [ALS_TEXTS[0], *names, ALS_TEXTS[4], "motor neuron disease", *ALS_TEXTS[2:4]]
    lengths = [len(e.ids) for e in minilm_onnx.encoder.tokenize(texts)]
    assert len(minilm_onnx.groups(lengths)) >= 2
    assert padded_tokens(lengths, minilm_onnx.groups(lengths)) < len(texts) * max(lengths)
    alone = np.vstack([minilm_onnx.embed([text]) for text in texts])
    np.testing.assert_allclose(minilm_onnx.embed(texts), alone, atol=1e-5)
    np.testing.assert_allclose(minilm_onnx.embed(texts[::-1]), alone[::-1], atol=1e-5)


def test_a_small_token_budget_changes_no_vector(minilm_onnx, onnx_dir):
    tight = OnnxEmbedder(DEFAULT_MODEL_ID, onnx_dir, max_tokens=64)
    np.testing.assert_allclose(tight.embed(ALS_TEXTS), minilm_onnx.embed(ALS_TEXTS), atol=1e-5)
    assert minilm_onnx.max_tokens == 16 * 256
