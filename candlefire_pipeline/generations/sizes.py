"""Bytes a generation takes in each store (`generation list`, the generations benchmark).

pgvector: the table, its indexes and TOAST, and its contract table (exact). Chroma (local): the
collection's HNSW folder plus the text and metadata values it stores in chroma.sqlite3 (the
SQLite indexes over them are shared and not counted). Qdrant (local): the collection's folder.
A store reached over the network reports None (the server knows, this process does not).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from candlefire_pipeline.settings import Settings

_CHROMA_SEGMENTS = """
SELECT s.id, s.scope FROM segments s JOIN collections c ON s.collection = c.id WHERE c.name = ?
"""
_CHROMA_PAYLOAD = """
SELECT COALESCE(SUM(LENGTH(m.key) + COALESCE(LENGTH(m.string_value), 8)), 0)
FROM embedding_metadata m JOIN embeddings e ON m.id = e.id WHERE e.segment_id = ?
"""


def folder_bytes(path: Path) -> int:
    """Bytes of every file under `path` (0 when it does not exist)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += (Path(root) / name).stat().st_size
            except FileNotFoundError:  # removed while walking
                continue
    return total


def pgvector_bytes(backend, table: str) -> int:
    """pg_total_relation_size of the table and its contract table, through an open backend."""
    row = backend.conn.execute(
        "SELECT COALESCE(pg_total_relation_size(to_regclass(%s)), 0)"
        " + COALESCE(pg_total_relation_size(to_regclass(%s)), 0)",
        [table, f"{table}_meta"],
    ).fetchone()
    return int(row[0])


def chroma_bytes(settings: Settings, collection: str) -> int | None:
    if settings.chroma_host is not None:
        return None
    database = settings.chroma_path / "chroma.sqlite3"
    if not database.exists():
        return 0
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        total = 0
        for segment_id, scope in conn.execute(_CHROMA_SEGMENTS, [collection]).fetchall():
            if scope == "VECTOR":
                total += folder_bytes(settings.chroma_path / segment_id)
            else:
                total += int(conn.execute(_CHROMA_PAYLOAD, [segment_id]).fetchone()[0])
        return total
    finally:
        conn.close()


def qdrant_bytes(settings: Settings, collection: str) -> int | None:
    if settings.qdrant_url is not None:
        return None
    return folder_bytes(settings.qdrant_path / "collection" / collection)


def store_bytes(store: str, settings: Settings, backend) -> int | None:
    """Bytes of one store's copy of the generation `settings` describes (None: unknown)."""
    if store == "pgvector":
        return pgvector_bytes(backend, settings.pg_table)
    if store == "chroma":
        return chroma_bytes(settings, settings.chroma_collection)
    if store == "qdrant":
        return qdrant_bytes(settings, settings.qdrant_collection)
    return None
