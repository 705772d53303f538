"""Agreement of embedding runtimes with torch on SciFact: cosine per document and nDCG@10."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from benchmarks.common.data import ndcg_at, scifact_chunks, scifact_queries, scifact_records

logger = logging.getLogger(__name__)

SLICE = 256


@dataclass(frozen=True)
class Agreement:
    runtime: str
    docs: int
    claims: int
    mean_cosine: float
    min_cosine: float
    ndcg10: float
    seconds: float


def embed_all(embedder, texts: list[str]) -> tuple[np.ndarray, float]:
    """Vectors in input order (embedded longest first in slices), and the seconds it took."""
    import time

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    started = time.perf_counter()
    for start in range(0, len(order), SLICE):
        part = order[start : start + SLICE]
        out[part] = embedder.embed([texts[i] for i in part])
        logger.info("%s: %d/%d", embedder.runtime, start + len(part), len(order))
    return out, time.perf_counter() - started


def ndcg10(doc_ids: list[str], docs: np.ndarray, queries: np.ndarray, relevant: list) -> float:
    """Mean binary-gain nDCG@10 of exact (brute-force) search over unit vectors."""
    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1)[:, :10]
    return float(np.mean([ndcg_at([doc_ids[j] for j in row], rel) for row, rel in
                          zip(top, relevant, strict=True)]))  # fmt: skip


def agreement(models: dict, docs: int | None = None) -> list[Agreement]:
    """Every runtime on the SciFact documents (all, or the first `docs`) and training claims (all,
    or as many); torch is the reference."""
    chunks = scifact_chunks(scifact_records(docs))
    doc_ids = [c["pmid"] for c in chunks]
    texts = [c["document"] for c in chunks]
    queries = scifact_queries()[:docs]
    claims = [q.text for q in queries]
    relevant = [q.relevant for q in queries]
    reference = None
    results = []
    for runtime, model in models.items():
        docs, seconds = embed_all(model, texts)
        claim_vectors, _ = embed_all(model, claims)
        if reference is None:
            reference = docs
        cos = np.sum(docs * reference, axis=1) / (
            np.linalg.norm(docs, axis=1) * np.linalg.norm(reference, axis=1)
        )
        score = ndcg10(doc_ids, docs, claim_vectors, relevant)
        results.append(
            Agreement(
                runtime,
                len(texts),
                len(claims),
                float(cos.mean()),
                float(cos.min()),
                score,
                seconds,
            )  # fmt: skip
        )
        logger.info("%s: %s", runtime, results[-1])
    return results
