"""Cross-encoder rerank of fused candidates, with a deterministic no-model fallback."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from candlefire_pipeline.settings import RetrievalSettings

logger = logging.getLogger(__name__)


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs; higher is more relevant."""

    def score(self, query: str, documents: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """sentence-transformers CrossEncoder, loaded on first use (import and weights are heavy)."""

    def __init__(self, model_id: str, batch_size: int = 32, device: str | None = None) -> None:
        if not model_id:
            raise ValueError("CrossEncoderReranker needs a model id or path")
        self.model_id = model_id
        self.batch_size = batch_size
        self.device = device
        self._model = None

    def _load(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            logger.info("loading cross-encoder %s", self.model_id)
            self._model = CrossEncoder(self.model_id, device=self.device)
        return self._model

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        pairs = [(query, document) for document in documents]
        scores = self._load().predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return [float(value) for value in scores]


def rerank(
    query: str,
    results: Sequence[dict],
    reranker: Reranker | None,
    top: int = RetrievalSettings.rerank_top,
    doc_chars: int = RetrievalSettings.rerank_doc_chars,
) -> list[dict]:
    """The best `top` results by reranker score, each with rerank_score; stable on ties.

    The reranker sees each document cut to its first `doc_chars` characters. With no reranker
    the input (RRF) order is kept and rerank_score = rrf_score, so ranking stays deterministic.
    """
    if top < 0 or doc_chars <= 0:
        raise ValueError(f"rerank needs top >= 0 and doc_chars > 0, got {top}, {doc_chars}")
    if reranker is None:
        return [{**row, "rerank_score": row["rrf_score"]} for row in results[:top]]
    documents = [row["document"][:doc_chars] for row in results]
    scores = reranker.score(query, documents)
    if len(scores) != len(results):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(results)} documents")
    if any(not math.isfinite(value) for value in scores):
        raise ValueError("reranker returned a non-finite score")
    scored = [
        {**row, "rerank_score": float(value)} for row, value in zip(results, scores, strict=True)
    ]
    return sorted(scored, key=lambda row: -row["rerank_score"])[:top]


def load_reranker(model_id: str | None) -> Reranker | None:
    """The configured cross-encoder (loaded lazily), or None for the RRF-order fallback."""
    return CrossEncoderReranker(model_id) if model_id else None
