"""The real packaged sentence-transformers model through retrieve() on the oracle and Qdrant."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, RetrievalSettings
from candlefire_pipeline_tests.retrieval import als_corpus as als


@pytest.fixture(scope="module")
def minilm():
    # load_embedder caches per process, so this shares the session's single model load
    return load_embedder(DEFAULT_MODEL_ID)


@pytest.fixture(scope="module")
def real_store(minilm):
    backend = build_backend("memory")
    backend.ensure_schema(minilm.model_id, minilm.dim)
    backend.replace_papers(als.store_rows(minilm))
    yield backend
    backend.close()


@pytest.mark.server  # loads the packaged model
def test_real_model_retrieve(real_store, minilm):
    retriever = Retriever(real_store, minilm, RetrievalSettings())
    result = retriever.retrieve(
        "SPG302 synaptic ALS mice", entity_names=["TDP-43", "SOD1"], terms=["SPG302", "ATXN2"]
    )
    # the query is 1001's document word for word, so the model must put it first
    assert result.semantic_pmids[0] == "1001"
    # keyword terms = entity names + terms; substring hits do not depend on the model:
    # 1004 (TDP-43), 1005 (SOD1), 1001, 1002, 1003 (SPG-302 body), 1007 (ATXN2)
    assert sorted(result.keyword_pmids) == ["1001", "1002", "1003", "1004", "1005", "1007"]
    assert result.grounding == {
        "TDP-43": {"corpus": True, "abstract": True},
        "SOD1": {"corpus": True, "abstract": True},
        "SPG302": {"corpus": True, "abstract": True},
        "ATXN2": {"corpus": True, "abstract": False},
    }
    # 8 papers < semantic_n=30, so every paper is fused and all fit in the top 15
    assert sorted(result.pmids) == [p.pmid for p in als.PAPERS]
    finals = [row["final_score"] for row in result.results]
    assert finals == sorted(finals, reverse=True)
    # identical text embeds identically: cosine 1 up to float error
    by_pmid = {row["pmid"]: row for row in result.results}
    assert by_pmid["1001"]["similarity"] == pytest.approx(1.0, abs=1e-4)


def test_real_model_refuses_a_hashing_store(minilm):
    backend = build_backend("memory")
    embed = als.embedder()
    backend.ensure_schema(embed.model_id, embed.dim)
    backend.replace_papers(als.store_rows(embed))
    with pytest.raises(DimensionMismatchError, match="384"):
        Retriever(backend, minilm)


def test_real_model_on_qdrant_ranks_like_the_oracle(real_store, minilm, make_backend):
    qdrant = make_backend("qdrant")
    qdrant.replace_papers(als.store_rows(minilm))
    assert qdrant.stored_model() == (minilm.model_id, 384)
    args = ("SPG302 synaptic ALS mice", ["TDP-43", "SOD1"], ["SPG302", "ATXN2"])
    ours, oracle = (Retriever(s, minilm, RetrievalSettings()).retrieve(*args)
                    for s in (qdrant, real_store))  # fmt: skip
    assert ours.pmids == oracle.pmids and ours.keyword_pmids == oracle.keyword_pmids
    assert ours.grounding == oracle.grounding
    for mine, exact in zip(ours.results, oracle.results, strict=True):
        assert mine["final_score"] == pytest.approx(exact["final_score"], rel=1e-5)
