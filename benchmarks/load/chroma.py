"""Chroma ingest rate of store rows at a given batch size (precomputed vectors, local client)."""

from __future__ import annotations

import time

import pyarrow as pa

from candlefire_pipeline.backends.chroma.backend import scalar_metadata
from candlefire_pipeline.backends.common import embedding_matrix


def add_in_batches(client, name: str, rows: pa.Table, batch: int) -> float:
    """Seconds to add rows to a fresh cosine collection `batch` rows per call (then dropped)."""
    collection = client.create_collection(
        name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    matrix = embedding_matrix(rows)
    started = time.perf_counter()
    for start in range(0, rows.num_rows, batch):
        part = rows.slice(start, batch)
        # the same call ChromaBackend.replace_papers makes per slice
        collection.upsert(
            ids=part["chunk_id"].to_pylist(),
            embeddings=matrix[start : start + batch],
            documents=part["document"].to_pylist(),
            metadatas=scalar_metadata(part),
        )
    seconds = time.perf_counter() - started
    if collection.count() != rows.num_rows:
        raise AssertionError(f"{name}: {collection.count()} rows stored, {rows.num_rows} sent")
    client.delete_collection(name)
    return seconds
