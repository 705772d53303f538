"""Term variants, candidate fetch through a VectorBackend, and backend-independent ranking."""

from candlefire_pipeline.retrieval.ranking import apply_citation_boost, recency_factor, rrf_merge
from candlefire_pipeline.retrieval.rerank import (
    CrossEncoderReranker,
    Reranker,
    load_reranker,
    rerank,
)
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.retrieval.ties import best_per_pmid, canonical_order
from candlefire_pipeline.retrieval.variants import term_matches_text, term_variants

__all__ = [
    "CrossEncoderReranker",
    "Reranker",
    "Retrieval",
    "Retriever",
    "apply_citation_boost",
    "best_per_pmid",
    "canonical_order",
    "recency_factor",
    "load_reranker",
    "rerank",
    "rrf_merge",
    "term_matches_text",
    "term_variants",
]
