"""Embedders, the embedding cache (model identity, text hash) and the chunks -> embeddings stage."""

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
from candlefire_pipeline.embedding.stage import EmbeddingSummary, embed_texts, write_embeddings

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
