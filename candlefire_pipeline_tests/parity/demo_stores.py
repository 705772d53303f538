"""The first demo papers with a deterministic lexical embedder, shared by the parity tests."""

from __future__ import annotations

import hashlib

import numpy as np

from candlefire_pipeline.corpus import demo
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import RetrievalSettings

PAPERS = 60  # the first demo papers: every drug spelling, full-text and abstract-only papers


class JitteredHashingEmbedder:
    """HashingEmbedder plus a small fixed per-text offset.

    The demo's template sentences give many chunks exactly the same cosine to a query under
    plain feature hashing; each store then breaks those ties by its own float rounding (~6e-8
    apart), which would make identical stores "disagree". The offset makes exact ties vanishingly
    rare while keeping vectors deterministic and lexical.
    """

    model_id = "hashing-jittered-test"

    def __init__(self, dim: int = 64, scale: float = 0.05) -> None:
        self.dim, self._scale, self._base = dim, scale, HashingEmbedder(dim=dim)

    def embed(self, texts) -> np.ndarray:
        out = self._base.embed(texts).astype(np.float64)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            noise = np.random.default_rng(seed).normal(size=self.dim)
            out[row] += self._scale * noise / np.sqrt(self.dim)
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


EMBEDDER = JitteredHashingEmbedder()
ABSTRACT_ONLY_PMID = demo.demo_pmid(demo.GAINS_FULL_TEXT)  # one chunk, its id the bare pmid


def whole_graph_ef(rows) -> int:
    """A Chroma ef_search past the row count. Chroma builds its graph from threads, so at its
    default effort one build in many misses a neighbour (an ann_miss, not what a parity test is
    about); an effort past the row count searches the whole small graph."""
    return 2 * rows.num_rows


def retrievers(stores: dict) -> dict[str, Retriever]:
    return {name: Retriever(s, EMBEDDER, RetrievalSettings()) for name, s in stores.items()}
