"""The backend's substring filters on Qdrant's own engine (qdrant-edge), with the real index.

What a Qdrant server does with our filters cannot be run here (no server binary); its segment
library can: MatchSubstring is exact and case-sensitive there too, and narrowing by the
full-text index (word tokenizer, lowercase) never drops a document that holds the variant.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from qdrant_client import models

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.qdrant.filters import narrowing_tokens, qdrant_filter
from candlefire_pipeline_tests.backends.qdrant import engine as qdrant_engine
from candlefire_pipeline_tests.backends.qdrant.test_backend import CONTEXT, PIECES, TERMS, TRICKY

DIM = 4


def random_documents(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = PIECES + CONTEXT + ["SOD1", "G93A", "TDP-43", "ΩMEGA", "spg", "ǅ", " of "]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 25))) for _ in range(n)]


DOCUMENTS = TRICKY + random_documents(600, seed=8)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    vectors = np.random.default_rng(1).normal(size=(len(DOCUMENTS), DIM))
    shard = qdrant_engine.open_shard(tmp_path_factory.mktemp("edge") / "shard", DIM)
    qdrant_engine.load(shard, DOCUMENTS, vectors)
    yield shard
    shard.close()


def holding(variants: list[str]) -> list[str]:
    return [str(i) for i, d in enumerate(DOCUMENTS) if any(v in d for v in variants)]


def random_variants(n: int, seed: int) -> list[str]:
    """Substrings cut from the documents (so most match) plus free combinations."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc = rng.choice(DOCUMENTS)
        start = rng.randrange(len(doc))
        out.append(doc[start : start + rng.randint(1, 12)])
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5))))
    return out


def test_exact_and_narrowed_filters_equal_python_substring_on_the_engine(shard):
    cases = [*TERMS, *([v] for v in random_variants(400, seed=2))]
    narrowed_cases = 0
    for variants in cases:
        expected = holding(variants)
        for narrow in (False, True):
            flt = qdrant_filter(Filter(), variants, narrow=narrow)
            assert qdrant_engine.chunk_ids(shard, flt) == expected, (variants, narrow)
        narrowed_cases += any(narrowing_tokens(v) for v in variants)
    assert narrowed_cases > 50  # the index really narrowed a good share of the cases


def test_several_variants_and_a_metadata_filter_combine(shard):
    variants = ["SPG302", "in SOD1 mice", "ΩMEGA-1"]
    pmids = ("0", "4", "5", "9")
    flt = qdrant_filter(Filter(pmids=pmids), variants, narrow=True)
    expected = [p for p in holding(variants) if p in pmids]
    assert expected == ["0", "4", "5"]
    assert qdrant_engine.chunk_ids(shard, flt) == expected


def test_the_engine_token_match_is_not_the_contract(shard):
    """Without the exact condition, the engine's MatchText ignores case and partial tokens."""
    text = models.Filter(
        must=[models.FieldCondition(key="document", match=models.MatchText(text="SPG302"))]
    )
    found = set(qdrant_engine.chunk_ids(shard, text))
    exact = set(holding(["SPG302"]))
    assert found - exact  # "dose of spg302 daily": case-insensitive
    assert exact - found  # e.g. "SPG302" inside a longer token of a random document
