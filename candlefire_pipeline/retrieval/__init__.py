"""Term variants, candidate fetch through a VectorBackend, and backend-independent ranking.

The names below load with their module on first use (module `__getattr__`): the app's read path
imports `retrieval.vector_cache` alone, without the retriever and its stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from candlefire_pipeline.retrieval.ranking import (
        apply_citation_boost,
        recency_factor,
        rrf_merge,
    )
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


#: name -> the submodule defining it (`rerank` names both a submodule and its function: once the
#: submodule is imported, the package attribute is the submodule, as Python binds it)
_HOME = {
    "apply_citation_boost": "ranking", "recency_factor": "ranking", "rrf_merge": "ranking",
    "CrossEncoderReranker": "rerank", "Reranker": "rerank", "load_reranker": "rerank",
    "rerank": "rerank", "Retrieval": "retriever", "Retriever": "retriever",
    "best_per_pmid": "ties", "canonical_order": "ties",
    "term_matches_text": "variants", "term_variants": "variants",
}  # fmt: skip


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
