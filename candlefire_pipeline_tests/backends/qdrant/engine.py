"""Qdrant's own engine in-process (qdrant-edge: the server's segment library, no server).

qdrant-client's local mode re-implements filters in Python and builds no payload index, so
it cannot show what a SERVER does with our filters. Qdrant Edge runs the engine itself: the
real MatchSubstring, the real word tokenizer and full-text index. This module loads chunks into
an Edge shard with the backend's payload indexes and runs the backend's own filters on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as edge
from qdrant_client import models

from candlefire_pipeline.backends.qdrant.filters import PAYLOAD_INDEXES
from candlefire_pipeline.backends.qdrant.points import point_id

_SCHEMAS = {
    models.PayloadSchemaType.KEYWORD: edge.PayloadSchemaType.Keyword,
    models.PayloadSchemaType.INTEGER: edge.PayloadSchemaType.Integer,
    models.PayloadSchemaType.BOOL: edge.PayloadSchemaType.Bool,
}
_TOKENIZERS = {models.TokenizerType.WORD: edge.TokenizerType.Word}


def _schema(schema):
    if isinstance(schema, models.TextIndexParams):
        return edge.TextIndexParams(
            tokenizer=_TOKENIZERS[schema.tokenizer], lowercase=schema.lowercase
        )
    return _SCHEMAS[schema]


def open_shard(path: Path, dim: int) -> edge.EdgeShard:
    """An empty shard with the backend's payload indexes (as a server collection has them)."""
    config = edge.EdgeConfig(vectors=edge.EdgeVectorParams(size=dim, distance=edge.Distance.Cosine))
    shard = edge.EdgeShard.create(str(path), config)
    for name, schema in PAYLOAD_INDEXES.items():
        shard.update(edge.UpdateOperation.create_field_index(name, _schema(schema)))
    return shard


def load(shard: edge.EdgeShard, documents: Sequence[str], vectors, batch: int = 1000) -> None:
    """Documents as chunks `0`, `1`, ... (payload: chunk_id, pmid, chunk_index, document)."""
    for start in range(0, len(documents), batch):
        points = [
            edge.Point(
                point_id(str(i)),
                [float(x) for x in vectors[i]],
                {"chunk_id": str(i), "pmid": str(i), "chunk_index": 0, "document": documents[i]},
            )
            for i in range(start, min(start + batch, len(documents)))
        ]
        shard.update(edge.UpdateOperation.upsert_points(points))


def _match(match):
    if isinstance(match, models.MatchSubstring):
        return edge.MatchSubstring(match.substring)
    if isinstance(match, models.MatchText):
        return edge.MatchText(match.text)
    if isinstance(match, models.MatchValue):
        return edge.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return edge.MatchAny(match.any)
    raise TypeError(f"no Edge translation for {match!r}")


def translate(condition):
    """A qdrant-client filter or condition (as the backend builds them) in Edge's types."""
    if isinstance(condition, models.Filter):
        return edge.Filter(
            must=[translate(c) for c in condition.must] if condition.must else None,
            should=[translate(c) for c in condition.should] if condition.should else None,
        )
    if condition.range is not None:
        bounds = edge.RangeFloat(gte=condition.range.gte, lte=condition.range.lte)
        return edge.FieldCondition(condition.key, range=bounds)
    return edge.FieldCondition(condition.key, match=_match(condition.match))


def chunk_ids(shard: edge.EdgeShard, flt: models.Filter | None) -> list[str]:
    """Chunk ids matching a backend filter, in id order."""
    request = edge.ScrollRequest(
        limit=10**7, filter=translate(flt) if flt else None, with_payload=True
    )
    records, _ = shard.scroll(request)
    return sorted((r.payload["chunk_id"] for r in records), key=int)


def count(shard: edge.EdgeShard, flt: models.Filter) -> int:
    return shard.count(edge.CountRequest(exact=True, filter=translate(flt)))


def top(shard: edge.EdgeShard, vector, flt: models.Filter | None, n: int) -> list[str]:
    """Chunk ids of the n nearest points passing the filter, exact (as the backend asks)."""
    request = edge.QueryRequest(
        limit=n,
        query=edge.Query.Nearest([float(x) for x in vector]),
        filter=translate(flt) if flt else None,
        params=edge.SearchParams(exact=True),
        with_payload=True,
    )
    return [p.payload["chunk_id"] for p in shard.query(request)]
