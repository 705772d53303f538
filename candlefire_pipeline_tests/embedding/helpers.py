"""Builders shared by the embedding tests: CHUNK_SCHEMA tables and a recording embedder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA
from candlefire_pipeline.embedding import HashingEmbedder


def chunk_rows(documents: Sequence[str]) -> pa.Table:
    """A CHUNK_SCHEMA table with one abstract-only chunk per document."""
    n = len(documents)
    pmids = [f"9{i:06d}" for i in range(n)]
    columns = {
        "chunk_id": pmids,
        "pmid": pmids,
        "section": ["abstract"] * n,
        "chunk_index": [0] * n,
        "title": [doc.split("\n")[0] for doc in documents],
        "year": [2020] * n,
        "doi": [""] * n,
        "citation_count": [0] * n,
        "entity_names": [""] * n,
        "mesh_terms": [""] * n,
        "has_full_text": [False] * n,
        "document": list(documents),
        # stand-in for the chunker's hash: any function of the content works for the cache
        "content_hash": [hashlib.sha256(doc.encode()).hexdigest() for doc in documents],
        "paper_hash": ["p" * 64] * n,
    }
    return pa.Table.from_pydict(columns, schema=CHUNK_SCHEMA)


class RecordingEmbedder:
    """A HashingEmbedder that remembers every call, to see exactly what reached the model."""

    def __init__(self, dim: int = 16) -> None:
        self.inner = HashingEmbedder(dim=dim)
        self.model_id = self.inner.model_id
        self.dim = dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]
