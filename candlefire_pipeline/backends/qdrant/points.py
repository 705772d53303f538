"""Chunks as Qdrant points and back (ids, payloads, result rows); the collection's contract."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
from qdrant_client import models

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import ResultRow

#: Namespace of the point ids (uuid5 of the chunk id); changing it orphans every stored point.
POINT_NAMESPACE = uuid.UUID("5f0c5a52-2b8e-4d0f-9a5e-0c2a8f3c6e11")


def point_id(chunk_id: str) -> str:
    """The point of a chunk: the same chunk id is always the same point."""
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id))


def payloads(rows: pa.Table) -> list[dict[str, Any]]:
    """One payload per validated row: every store column but the vector."""
    return rows.drop_columns(["embedding"]).to_pylist()


def result_row(payload: dict[str, Any], similarity: float | None) -> ResultRow:
    return common.result_row(payload["chunk_id"], payload["document"], payload, similarity)


def hits(points: list[models.ScoredPoint]) -> list[ResultRow]:
    """Scored points as result rows, best first (cosine score = 1 - cosine distance)."""
    return common.sort_hits([result_row(p.payload, p.score) for p in points])


def contract(config: models.CollectionConfig, name: str) -> tuple[str, int]:
    """(model_id, dim) from a collection's metadata; a clear error for a foreign collection."""
    meta = config.metadata or {}
    if "model_id" not in meta or "dim" not in meta:
        raise ValueError(
            f"Qdrant collection {name!r} has no candlefire model contract in its metadata: it "
            "was not created by candlefire (reset it or use another collection)"
        )
    vectors = config.params.vectors
    if not isinstance(vectors, models.VectorParams) or vectors.distance != models.Distance.COSINE:
        raise ValueError(f"Qdrant collection {name!r} is not one cosine vector")
    return meta["model_id"], int(meta["dim"])
