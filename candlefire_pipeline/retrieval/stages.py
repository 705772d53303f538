"""candle-fire's candidate stages over any VectorBackend (its rag/retriever.py, stage by stage).

- semantic: the 2n chunks most similar to the query, best chunk per paper, first n papers;
- entities: the `hits` chunks most similar to each entity NAME, best row per paper across
  names, first n papers;
- keyword: per spelling variant of each term, the `hits` chunks most similar to the VARIANT's
  own embedding among the chunks whose document contains it (exact substring), best row per
  paper across variants, no overall cap.

Rows are ranked and cut by the store's 1 - cosine distance; a stage's rows then report
candle-fire's similarity, max(0, 1 - distance). "Best per paper" is ties.best_per_pmid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

import numpy as np

from candlefire_pipeline.backends.base import Filter, ResultRow, VectorBackend
from candlefire_pipeline.retrieval.fetch import top_k
from candlefire_pipeline.retrieval.ties import best_per_pmid


def semantic_stage(
    backend: VectorBackend, vector: np.ndarray, n: int, where: Filter | None = None
) -> list[ResultRow]:
    """Papers by their best chunk among the 2n chunks most similar to the vector; first n."""
    matrix = np.asarray(vector, dtype=np.float32).reshape(1, -1)

    def ask(_indices: Sequence[int], limit: int) -> list[list[ResultRow]]:
        return backend.semantic_candidates(matrix, limit, where, stage="semantic")

    (chunks,) = top_k(ask, 1, 2 * n)
    return merged([chunks], n)


def entity_stage(
    backend: VectorBackend, names: Sequence[str], vectors: np.ndarray, hits: int, n: int
) -> list[ResultRow]:
    """Per name its `hits` chunks most similar to the name's vector (one round trip), best per
    paper, first n. The names go with their vectors: a store may keep answers by name."""
    if not len(vectors):
        return []

    def ask(indices: Sequence[int], limit: int) -> list[list[ResultRow]]:
        picked = list(indices)
        return backend.semantic_candidates(
            vectors[picked], limit, stage="entities", texts=[names[i] for i in picked]
        )

    return merged(top_k(ask, len(vectors), hits), n)


def variant_hits(
    backend: VectorBackend, variants: Sequence[str], vectors: np.ndarray, hits: int
) -> dict[str, list[ResultRow]]:
    """variant -> the `hits` chunks containing it most similar to its own vector."""
    if not variants:
        return {}

    def ask(indices: Sequence[int], limit: int) -> list[list[ResultRow]]:
        picked = list(indices)
        return backend.substring_candidates([variants[i] for i in picked], vectors[picked], limit)

    return dict(zip(variants, top_k(ask, len(variants), hits), strict=True))


def keyword_stage(
    hits_by_variant: Mapping[str, list[ResultRow]], variants: Iterable[str]
) -> list[ResultRow]:
    """The best row per paper over the hits of these variants (candle-fire: no overall cap)."""
    return merged([hits_by_variant[v] for v in variants])


def merged(lists: Iterable[list[ResultRow]], n: int | None = None) -> list[ResultRow]:
    """candle-fire's merge of candidate lists: the most similar row per paper, most similar
    first, the first n papers (all when n is None)."""
    return clamped(best_per_pmid(chain.from_iterable(lists))[:n])


def clamped(rows: list[ResultRow]) -> list[ResultRow]:
    """candle-fire's similarity, max(0, 1 - distance), on rows already in their final order."""
    return [
        {**row, "similarity": 0.0}
        if row["similarity"] is not None and row["similarity"] < 0
        else row
        for row in rows
    ]
