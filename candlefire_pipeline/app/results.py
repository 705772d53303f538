"""chromadb 1.5's GetResult / QueryResult dicts, shaped exactly as a Chroma collection returns
them: every key always present (None when not included), `uris` a None per row when asked
(no store here keeps uris), `data` None, `included` the include list, embeddings as float64
numpy arrays (an empty one when no row matched)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Row:
    chunk_id: str
    document: str
    metadata: dict
    distance: float | None = None
    vector: np.ndarray | None = None


def _vectors(rows: list[Row]) -> np.ndarray:
    """The stored float32 vectors as float64, as Chroma returns them (np.array([]) for none)."""
    if not rows:
        return np.array([])
    return np.array([row.vector for row in rows], dtype=np.float32).astype(np.float64)


def get_result(rows: list[Row], include: tuple[str, ...]) -> dict:
    """A GetResult: flat lists."""
    return {
        "ids": [row.chunk_id for row in rows],
        "embeddings": _vectors(rows) if "embeddings" in include else None,
        "documents": [row.document for row in rows] if "documents" in include else None,
        "uris": [None for _ in rows] if "uris" in include else None,
        "included": list(include),
        "data": None,
        "metadatas": [dict(row.metadata) for row in rows] if "metadatas" in include else None,
    }


def query_result(hits: list[list[Row]], include: tuple[str, ...]) -> dict:
    """A QueryResult: one list per query vector."""

    def each(field, wanted: str):
        return [[field(row) for row in rows] for rows in hits] if wanted in include else None

    return {
        "ids": [[row.chunk_id for row in rows] for rows in hits],
        "embeddings": [_vectors(rows) for rows in hits] if "embeddings" in include else None,
        "documents": each(lambda row: row.document, "documents"),
        "uris": each(lambda row: None, "uris"),
        "included": list(include),
        "data": None,
        "metadatas": each(lambda row: dict(row.metadata), "metadatas"),
        "distances": each(lambda row: float(row.distance), "distances"),
    }
