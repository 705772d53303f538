"""Embedders, the embedding cache (model identity, text hash) and the chunks -> embeddings stage.

The names below load with their module on first use (module `__getattr__`): a query path that
asks for `embedder_for` does not load the stage (pyarrow), the cache or the Ray executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from candlefire_pipeline.embedding.cache import EmbeddingCache
    from candlefire_pipeline.embedding.embedders import (
        HASHING_MODEL_ID,
        Embedder,
        HashingEmbedder,
        SentenceTransformerEmbedder,
        embedder_for,
        load_embedder,
    )
    from candlefire_pipeline.embedding.executor import stage_embedder
    from candlefire_pipeline.embedding.model_files import embedding_identity, logical_model_id
    from candlefire_pipeline.embedding.stage import (
        EmbeddingSummary,
        embed_texts,
        write_embeddings,
    )

__all__ = [
    "HASHING_MODEL_ID",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingSummary",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "embed_texts",
    "embedder_for",
    "embedding_identity",
    "load_embedder",
    "logical_model_id",
    "stage_embedder",
    "write_embeddings",
]


def __getattr__(name: str):
    if name == "EmbeddingCache":
        from candlefire_pipeline.embedding.cache import EmbeddingCache

        return EmbeddingCache
    if name == "stage_embedder":
        from candlefire_pipeline.embedding.executor import stage_embedder

        return stage_embedder
    if name in ("EmbeddingSummary", "embed_texts", "write_embeddings"):
        from candlefire_pipeline.embedding import stage

        return getattr(stage, name)
    if name in ("embedding_identity", "logical_model_id"):
        from candlefire_pipeline.embedding import model_files

        return getattr(model_files, name)
    if name in __all__:
        from candlefire_pipeline.embedding import embedders

        return getattr(embedders, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
