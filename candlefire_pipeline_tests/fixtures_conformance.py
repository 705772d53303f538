"""Session fixtures of candle-fire's recorded conformance fixtures (../shared/data).

- `conformance`: the fixture folder (ConformanceFixtures), its corpus chunked once.
- `conformance_rows`: store rows of that corpus, chunked through the pipeline's own papers and
  chunks stages, with the vectors candle-fire's collection stored.
- `conformance_embedder`: the real packaged model (the product's query runtime) behind a memo,
  every text of the recorded queries embedded once for the whole session.
- `conformance_exact`: the exact oracle over the corpus, to explain the recording's ANN misses.
"""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.parity.conformance.check import ExactPools, texts_to_embed
from candlefire_pipeline.parity.conformance.fixtures import (
    FIXTURE_MODEL_ID,
    ConformanceFixtures,
)
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_QUERY_RUNTIME


@pytest.fixture(scope="session")
def conformance(shared_data) -> ConformanceFixtures:
    return ConformanceFixtures.open(shared_data / "candlefire_conformance")


@pytest.fixture(scope="session")
def conformance_rows(conformance):
    return conformance.store_rows()


@pytest.fixture(scope="session")
def conformance_embedder(conformance, onnx_dir):
    embedder = load_embedder(FIXTURE_MODEL_ID, runtime=DEFAULT_QUERY_RUNTIME, onnx_dir=onnx_dir)
    memo = MemoEmbedder(embedder)
    memo.embed(texts_to_embed(conformance))
    return memo


@pytest.fixture(scope="session")
def conformance_exact(conformance_rows, conformance_embedder) -> ExactPools:
    oracle = build_backend("memory")
    oracle.replace_papers(conformance_rows)
    return ExactPools(Retriever(oracle, conformance_embedder))
