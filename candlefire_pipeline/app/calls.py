"""The arguments of chromadb 1.5's `get` and `query`, checked (Chroma's rules) before any store
is asked: a call Chroma refuses is refused here with a ValueError naming the problem, and one it
would answer but this collection does not serve raises UnsupportedCallError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from candlefire_pipeline.app.filters import (
    Contains,
    Field,
    Logical,
    UnsupportedCallError,
    parse_where,
    parse_where_document,
)

#: chromadb 1.5's include items; "data" needs a data loader, which no store here has.
INCLUDE_ITEMS = ("documents", "embeddings", "metadatas", "distances", "uris", "data")
#: Chroma's defaults (fresh lists per call: Chroma's own defaults are shared lists).
GET_INCLUDE = ("metadatas", "documents")
QUERY_INCLUDE = ("metadatas", "documents", "distances")


@dataclass(frozen=True)
class GetCall:
    ids: tuple[str, ...] | None
    where: Field | Logical | None
    where_document: Contains | Logical | None
    limit: int | None
    offset: int
    include: tuple[str, ...]
    #: the filters as given, for the real Chroma collection
    raw_where: dict | None = None
    raw_where_document: dict | None = None


@dataclass(frozen=True)
class QueryCall:
    texts: tuple[str, ...] | None  # embedded by the serving generation's model
    vectors: np.ndarray | None  # (q x dim) float32 when given as query_embeddings
    n_results: int
    where: Field | Logical | None
    where_document: Contains | Logical | None
    include: tuple[str, ...]
    raw_where: dict | None = None
    raw_where_document: dict | None = None

    @property
    def size(self) -> int:
        return len(self.texts) if self.texts is not None else len(self.vectors)


def _include(include: Any, call: str) -> tuple[str, ...]:
    if not isinstance(include, list | tuple):
        raise ValueError(f"{call}: include must be a list, got {include!r}")
    for item in include:
        if item not in INCLUDE_ITEMS:
            raise ValueError(f"{call}: include items are {', '.join(INCLUDE_ITEMS)}; got {item!r}")
    if "data" in include:
        raise UnsupportedCallError(f"{call}: include 'data' is not served (no data loader)")
    if call == "get" and "distances" in include:
        raise ValueError("get: include cannot hold 'distances' (a get has no query)")
    return tuple(include)


def _one_or_many(value: Any, call: str, name: str, one: str) -> list[str]:
    """chromadb's one-or-many argument: a str, or a non-empty list of str, as a list."""
    listed = [value] if isinstance(value, str) else value
    if not isinstance(listed, list) or not listed:
        raise ValueError(f"{call}: {name} must be a str or a non-empty list of str, got {value!r}")
    for item in listed:
        if not isinstance(item, str):
            raise ValueError(f"{call}: {one} must be a str, got {item!r}")
    return listed


def _ids(ids: Any) -> tuple[str, ...] | None:
    if ids is None:
        return None
    listed = _one_or_many(ids, "get", "ids", "an id")
    if len(set(listed)) != len(listed):
        twice = sorted({i for i in listed if listed.count(i) > 1})
        raise ValueError(f"get: ids must be unique, found duplicates of {', '.join(twice[:10])}")
    return tuple(listed)


def _count(value: Any, name: str, call: str, least: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{call}: {name} must be an int >= {least}, got {value!r}")
    return value


def _filters(where: Any, where_document: Any) -> tuple:
    parsed = None if where is None else parse_where(where)
    document = None if where_document is None else parse_where_document(where_document)
    return parsed, document


def get_call(ids, where, limit, offset, where_document, include) -> GetCall:
    parsed, document = _filters(where, where_document)
    return GetCall(
        ids=_ids(ids),
        where=parsed,
        where_document=document,
        limit=_count(limit, "limit", "get", 0),
        offset=_count(offset, "offset", "get", 0) or 0,
        include=_include(include, "get"),
        raw_where=where,
        raw_where_document=where_document,
    )


def _texts(texts: Any) -> tuple[str, ...]:
    return tuple(_one_or_many(texts, "query", "query_texts", "a query text"))


def _vectors(embeddings: Any) -> np.ndarray:
    """Chroma's accepted shapes: one vector (list or 1-D array), or a list / 2-D array of them."""
    if isinstance(embeddings, np.ndarray):
        matrix = embeddings
    elif isinstance(embeddings, list) and embeddings:
        first = embeddings[0]
        one = not isinstance(first, list | tuple | np.ndarray)
        matrix = _matrix([embeddings] if one else embeddings)
    else:
        raise ValueError(f"query: query_embeddings must be a non-empty list or numpy array, got "
                         f"{type(embeddings).__name__}")  # fmt: skip
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or not matrix.shape[0] or not matrix.shape[1]:
        raise ValueError(f"query: query_embeddings must be vectors, got shape {matrix.shape}")
    if matrix.dtype.kind not in "fiu":
        raise ValueError(f"query: query_embeddings must be numbers, got {matrix.dtype}")
    matrix = matrix.astype(np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError("query: query_embeddings hold a NaN or infinite value")
    return matrix


def _matrix(rows: list) -> np.ndarray:
    lengths = {len(row) for row in rows}
    if len(lengths) != 1:
        raise ValueError(f"query: query_embeddings have different lengths {sorted(lengths)}")
    return np.asarray(rows)


def query_call(query_embeddings, query_texts, n_results, where, where_document, include,
               **unserved) -> QueryCall:  # fmt: skip
    for name, value in unserved.items():
        if value is not None:
            raise UnsupportedCallError(f"query: {name} is not served")
    if query_embeddings is None and query_texts is None:
        raise ValueError("query: give query_embeddings or query_texts")
    if isinstance(n_results, bool) or not isinstance(n_results, int) or n_results <= 0:
        raise ValueError(f"query: n_results must be an int > 0, got {n_results!r}")
    parsed, document = _filters(where, where_document)
    vectors = None if query_embeddings is None else _vectors(query_embeddings)
    texts = None if query_texts is None else _both(query_texts, vectors)
    return QueryCall(
        texts=texts if vectors is None else None,
        vectors=vectors,
        n_results=n_results,
        where=parsed,
        where_document=document,
        include=_include(include, "query"),
        raw_where=where,
        raw_where_document=where_document,
    )


def _both(texts, vectors: np.ndarray | None) -> tuple[str, ...] | None:
    """The query texts; beside query_embeddings Chroma only checks that they are as many (and
    queries the embeddings)."""
    if vectors is None:
        return _texts(texts)
    listed = [texts] if isinstance(texts, str) else texts
    if not isinstance(listed, list) or len(listed) != len(vectors):
        raise ValueError(
            f"query: {len(vectors)} query_embeddings but query_texts {texts!r}: unequal lengths"
        )
    return None
