"""What the app benchmark wraps around each arm: the embedder and the collection, counting their
calls, and the real Chroma collection as candle-fire opens it (its embedding function embedding
the query texts, one embedder call per `query`). The collection tests use the same wrappers."""

from __future__ import annotations

import time
from pathlib import Path


class CountingEmbedder:
    """An embedder, counting its calls (one call may embed many texts), the texts and the
    seconds they took."""

    def __init__(self, inner) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.calls, self.texts, self.seconds = 0, 0, 0.0

    def embed(self, texts):
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.calls += 1
            self.texts += len(texts)
            self.seconds += time.perf_counter() - started


class CountingCalls:
    """A collection, counting each method the app calls on it by name."""

    def __init__(self, collection) -> None:
        self.collection, self.calls = collection, {"count": 0, "get": 0, "query": 0}

    def __getattr__(self, name: str):
        self.calls[name] = self.calls.get(name, 0) + 1
        return getattr(self.collection, name)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class EmbeddingCollection:
    """The real chromadb collection as candle-fire opens it: query texts embedded by the model
    (its embedding function: one call per `query`), everything else Chroma's own."""

    def __init__(self, collection, embedder) -> None:
        self.collection, self.embedder = collection, embedder

    def count(self) -> int:
        return self.collection.count()

    def get(self, **kwargs) -> dict:
        return self.collection.get(**kwargs)

    def query(self, query_texts, **kwargs) -> dict:
        vectors = self.embedder.embed(list(query_texts))
        return self.collection.query(query_embeddings=vectors, **kwargs)


def open_chroma_collection(path: Path, name: str, embedder):
    """(the persistent client, the collection at `path` named `name` behind EmbeddingCollection);
    the caller closes the client."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(
        str(path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    collection = client.get_collection(name, embedding_function=None)
    return client, EmbeddingCollection(collection, embedder)
