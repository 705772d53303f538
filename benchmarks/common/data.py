"""Where benchmark data lives and the real data they read: SciFact, and the embedding cache."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from candlefire_pipeline.corpus.chunking import chunk_paper
from candlefire_pipeline.embedding import EmbeddingCache
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.parity.quality import ndcg_at  # noqa: F401 - the benchmarks' nDCG
from candlefire_pipeline.settings import REPO_ROOT

logger = logging.getLogger(__name__)

#: candle-fire's corpus at its 20k-paper cap (the anchor's size).
LATENCY_CHUNKS = 62_196
#: Characters of a synthetic chunk's text (candle-fire's chunks are ~1,000 characters).
DOC_CHARS = 1_000


def shared_data() -> Path:
    """The real corpora in ../shared/data (CANDLEFIRE_SHARED_DATA)."""
    return Path(os.environ.get("CANDLEFIRE_SHARED_DATA", REPO_ROOT.parent / "shared/data"))


def bench_dir() -> Path:
    """The benchmarks' cache: stores, embeddings and per-part figures (CANDLEFIRE_BENCH_DIR)."""
    path = Path(os.environ.get("CANDLEFIRE_BENCH_DIR", REPO_ROOT / "data/bench_retrieval"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_cached(embedder, texts: Sequence[str], hashes: Sequence[str] | None = None) -> np.ndarray:
    """Embeddings of texts through the content-hash EmbeddingCache of the benchmark dir."""
    cache = EmbeddingCache(bench_dir() / "embedding_cache.sqlite")
    hashes = list(hashes) if hashes is not None else [text_hash(t) for t in texts]
    found = cache.get_many(embedder.model_id, hashes)
    missing = [i for i, h in enumerate(hashes) if h not in found]
    # in slices, each cached at once, so an interrupted run keeps what it embedded
    for start in range(0, len(missing), 512):
        part = missing[start : start + 512]
        logger.info("embedding texts %d-%d of %d uncached", start, start + len(part), len(missing))
        vectors = embedder.embed([texts[i] for i in part])
        cache.put_many(embedder.model_id, [hashes[i] for i in part], vectors)
        found.update({hashes[i]: v for i, v in zip(part, vectors, strict=True)})
    return np.stack([found[h] for h in hashes]).astype(np.float32)


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    relevant: frozenset[str]


def scifact_records(limit: int | None = None) -> list[dict]:
    """The SciFact corpus (5,183 abstracts), or its first `limit` records."""
    with (shared_data() / "scifact/corpus.jsonl").open() as fh:
        return [json.loads(line) for line in itertools.islice(fh, limit) if line.strip()]


def scifact_chunks(records: list[dict]) -> list[dict]:
    """SciFact abstracts through the project's chunker (abstract-only: one chunk each)."""
    chunks = [chunk for record in records for chunk in chunk_paper(record)]
    if len(chunks) != len(records):
        raise ValueError("expected one chunk per abstract-only SciFact record")
    return chunks


def scifact_queries() -> list[Query]:
    with (shared_data() / "scifact/queries_train.jsonl").open() as fh:
        rows = [json.loads(line) for line in fh]
    return [Query(r["qid"], r["text"], frozenset(map(str, r["relevant"]))) for r in rows]


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int = 100) -> float:
    """Share of the relevant documents in the top k (the parity report's recall)."""
    return metrics.recall(ranked[:k], relevant)
