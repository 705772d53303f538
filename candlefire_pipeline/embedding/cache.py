"""The embedding cache in SQLite (model identity, text hash), shared safely by processes."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from candlefire_pipeline.fsutil import file_lock

#: Stays below SQLite's bound-parameter limit (999 on old builds) with room for model_id.
_IN_CHUNK = 900
_BUSY_TIMEOUT_S = 60.0

_CREATE = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model_id, content_hash)
) WITHOUT ROWID
"""


def text_key(text: str) -> str:
    """The cache key of an embedded text: what the model saw, nothing else.

    A chunk's content hash also covers the chunker version and metadata (citation count, year):
    keying by it re-embedded unchanged text after a citation update or under a new chunker.
    """
    return "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """float32 vectors keyed by (model_id, key); WAL so two writers wait, not fail.

    The stage's keys are text_key(document); rows written before that under a chunk's content
    hash (the `content_hash` column holds either) are still read as a fallback.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Switching a new file to WAL fails with "database is locked" instead of waiting when
        # another process does the same, so first-time setup is serialized by a file lock.
        lock_path = self.path.with_name(self.path.name + ".lock")
        with file_lock(lock_path), self._connect() as conn:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_CREATE)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # A connection per call keeps the cache usable across forks, threads and pickling.
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
            yield conn
        finally:
            conn.close()

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors of the given keys; misses are simply absent."""
        unique = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        with self._connect() as conn:
            for start in range(0, len(unique), _IN_CHUNK):
                part = unique[start : start + _IN_CHUNK]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    "SELECT content_hash, dim, vector FROM embeddings"
                    f" WHERE model_id = ? AND content_hash IN ({marks})",
                    [model_id, *part],
                )
                for content_hash, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == dim:  # a truncated blob is a miss, never a short vector
                        found[content_hash] = vector.copy()
        return found

    def put_many(self, model_id: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store one row of `vectors` per key (replacing what was there)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(hashes):
            raise ValueError(
                f"put_many needs one vector per hash: {len(hashes)} hashes, shape {vectors.shape}"
            )
        dim = int(vectors.shape[1])
        rows = [
            (model_id, content_hash, dim, np.ascontiguousarray(vector).tobytes())
            for content_hash, vector in zip(hashes, vectors, strict=True)
        ]
        with self._connect() as conn:
            # IMMEDIATE takes the write lock up front, so a concurrent writer waits on busy_timeout.
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (model_id, content_hash, dim, vector)"
                    " VALUES (?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def count(self, model_id: str | None = None) -> int:
        """Number of cached vectors, for one model or all."""
        with self._connect() as conn:
            if model_id is None:
                (total,) = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()
            else:
                (total,) = conn.execute(
                    "SELECT COUNT(*) FROM embeddings WHERE model_id = ?", [model_id]
                ).fetchone()
        return int(total)
