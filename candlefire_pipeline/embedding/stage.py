"""The embedding stage: chunks.parquet -> embeddings.parquet, streamed, through the cache."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.schema import embedding_schema
from candlefire_pipeline.embedding.cache import EmbeddingCache, text_key
from candlefire_pipeline.embedding.embedders import Embedder
from candlefire_pipeline.progress import DEFAULT_INTERVAL_S, ProgressMeter

logger = logging.getLogger(__name__)

_READ_COLUMNS = ["chunk_id", "content_hash", "document"]
# Dictionary-encoding and compressing float vectors costs most of the write time for no gain
# (the file gets bigger); only the repeated model_id/dim columns benefit from a dictionary.
_WRITER_OPTIONS = {
    "use_dictionary": ["model_id", "dim"],
    "compression": {
        "chunk_id": "snappy",
        "content_hash": "snappy",
        "model_id": "snappy",
        "dim": "snappy",
        "embedding.list.element": "none",
    },
}


@dataclass(frozen=True)
class EmbeddingSummary:
    """What one run of the embedding stage did; embedded + cached == chunks."""

    chunks: int
    #: texts the model encoded in this run
    embedded: int
    #: rows whose vector was reused (from the cache or an identical chunk earlier in the file)
    cached: int
    seconds: float
    chunks_per_second: float
    #: the identity vectors were stored and cached under (the model id, plus a quantized runtime)
    model_id: str
    dim: int
    #: "torch", "onnx", "onnx-int8" or "python" (the hashing embedder)
    runtime: str = "unknown"
    #: seconds spent inside the model, the rest is parquet, cache and bookkeeping
    model_seconds: float = 0.0
    #: progress lines reported, the final one included
    progress_reports: int = 0


def _check_vectors(vectors: np.ndarray, count: int, embedder: Embedder) -> np.ndarray:
    """The embedder's output, or a clear error when it broke the Embedder contract."""
    if vectors.shape != (count, embedder.dim):
        raise ValueError(
            f"embedder {embedder.model_id!r} returned shape {vectors.shape},"
            f" expected ({count}, {embedder.dim})"
        )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _embed_longest_first(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embed texts longest first (similar lengths share a padded batch), in input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    vectors = _check_vectors(embedder.embed([texts[i] for i in order]), len(texts), embedder)
    restored = np.empty_like(vectors)
    restored[order] = vectors
    return restored


def _cached(
    cache: EmbeddingCache, embedder: Embedder, keys: dict[str, str], legacy: dict[str, str]
) -> dict[str, np.ndarray]:
    """text key -> cached vector; a key missing under its text is looked up under the legacy
    content hash (a cache from before text keys) and copied to its text key."""
    found = cache.get_many(embedder.model_id, list(keys))
    found = {k: v for k, v in found.items() if v.shape[0] == embedder.dim}
    wanted = {legacy[k]: k for k in keys if k not in found and k in legacy}
    if wanted:
        old = cache.get_many(embedder.model_id, list(wanted))
        old = {wanted[h]: v for h, v in old.items() if v.shape[0] == embedder.dim}
        if old:
            cache.put_many(embedder.model_id, list(old), np.stack(list(old.values())))
            found.update(old)
    return found


def _batch_vectors(
    batch: pa.RecordBatch, embedder: Embedder, cache: EmbeddingCache, timer: list[float]
) -> tuple[np.ndarray, int]:
    """Vectors for one record batch in row order, and how many texts the model encoded."""
    hashes = batch.column("content_hash").to_pylist()
    if None in hashes:
        raise ValueError("chunks.parquet has a row without content_hash")
    documents = batch.column("document").to_pylist()
    for row, document in enumerate(documents):
        if document is None:
            chunk_id = batch.column("chunk_id")[row].as_py()
            raise ValueError(f"chunk {chunk_id!r} has no document to embed")
    keys = [text_key(document) for document in documents]
    texts = dict(zip(keys, documents, strict=True))
    known = _cached(cache, embedder, texts, dict(zip(keys, hashes, strict=True)))
    # one slice: a record batch is the unit the stage writes and resumes by
    encoded = _embed_misses(embedder, cache, texts, known, max(len(texts), 1), timer)
    return _in_order(keys, known, embedder.dim), encoded


def embed_texts(
    embedder: Embedder, cache: EmbeddingCache, texts: list[str], slice_size: int = 512
) -> tuple[np.ndarray, int]:
    """Vectors of `texts` in order through the cache, and how many the model encoded; misses
    are embedded and cached slice by slice, so an interrupted call keeps what it embedded."""
    keys = [text_key(text) for text in texts]
    unique = dict(zip(keys, texts, strict=True))
    known = _cached(cache, embedder, unique, {})
    encoded = _embed_misses(embedder, cache, unique, known, slice_size)
    return _in_order(keys, known, embedder.dim), encoded


def _embed_misses(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: dict[str, str],
    known: dict[str, np.ndarray],
    slice_size: int,
    timer: list[float] | None = None,
) -> int:
    """Embed the texts `known` lacks into it and the cache, slice by slice (an interrupted call
    keeps what it cached); how many were encoded. `timer[0]` adds the model's time."""
    misses = [key for key in texts if key not in known]
    for start in range(0, len(misses), slice_size):
        part = misses[start : start + slice_size]
        started = time.perf_counter()
        fresh = _embed_longest_first(embedder, [texts[key] for key in part])
        if timer is not None:
            timer[0] += time.perf_counter() - started
        cache.put_many(embedder.model_id, part, fresh)
        known.update(zip(part, fresh, strict=True))
    return len(misses)


def _in_order(keys: list[str], known: dict[str, np.ndarray], dim: int) -> np.ndarray:
    """The vectors of `keys`, one row each, in order."""
    out = np.empty((len(keys), dim), dtype=np.float32)
    for row, key in enumerate(keys):
        out[row] = known[key]
    return out


def _embedding_table(
    batch: pa.RecordBatch, vectors: np.ndarray, embedder: Embedder, schema: pa.Schema
) -> pa.Table:
    rows = batch.num_rows
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    return pa.Table.from_arrays(
        [
            batch.column("chunk_id"),
            batch.column("content_hash"),
            pa.repeat(pa.scalar(embedder.model_id, pa.string()), rows),
            pa.repeat(pa.scalar(embedder.dim, pa.int32()), rows),
            pa.FixedSizeListArray.from_arrays(flat, embedder.dim),
        ],
        schema=schema,
    )


def write_embeddings(
    chunks_path: Path,
    out_path: Path,
    embedder: Embedder,
    cache: EmbeddingCache,
    read_batch: int = 1024,
    progress: Callable[[str], None] | None = None,
    progress_interval: float = DEFAULT_INTERVAL_S,
) -> EmbeddingSummary:
    """Write embeddings.parquet aligned row for row with chunks.parquet; embed cache misses only.

    Streams `read_batch` rows at a time, so memory does not grow with the file. `progress` gets
    a line (done/total, rate, ETA) after the first batch, then every `progress_interval`
    seconds, and one at the end; the summary carries the final figures.
    """
    chunks_file = _chunks_file(chunks_path)

    def report(message: str) -> None:
        logger.info(message)
        if progress is not None:
            progress(message)

    meter = ProgressMeter(
        "embeddings",
        chunks_file.metadata.num_rows,
        report,
        unit="chunks",
        interval_s=progress_interval,
    )
    model_timer = [0.0]
    batches = chunks_file.iter_batches(batch_size=read_batch, columns=_READ_COLUMNS)
    embedded = _write_vectors(batches, Path(out_path), embedder, cache, meter, model_timer)
    final = meter.finish()
    return EmbeddingSummary(
        chunks=final.done,
        embedded=embedded,
        cached=final.done - embedded,
        seconds=final.seconds,
        chunks_per_second=final.rate,
        model_id=embedder.model_id,
        dim=embedder.dim,
        runtime=getattr(embedder, "runtime", "unknown"),
        model_seconds=model_timer[0],
        progress_reports=meter.reports,
    )


def _chunks_file(chunks_path: Path) -> pq.ParquetFile:
    chunks_file = pq.ParquetFile(chunks_path)
    missing = set(_READ_COLUMNS) - set(chunks_file.schema_arrow.names)
    if missing:
        raise ValueError(f"{chunks_path} lacks chunk columns {sorted(missing)}")
    return chunks_file


def _write_vectors(batches, out_path: Path, embedder, cache, meter, model_timer) -> int:
    """Stream the batches' vectors into out_path (published atomically); chunks embedded."""
    schema = embedding_schema(embedder.dim)
    tmp_path = out_path.with_name(out_path.name + ".tmp")
    embedded = 0
    try:
        with pq.ParquetWriter(tmp_path, schema, **_WRITER_OPTIONS) as writer:
            for batch in batches:
                vectors, fresh = _batch_vectors(batch, embedder, cache, model_timer)
                writer.write_table(_embedding_table(batch, vectors, embedder, schema))
                embedded += fresh
                meter.update(meter.done + batch.num_rows)
        os.replace(tmp_path, out_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return embedded
