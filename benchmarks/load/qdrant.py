"""Qdrant ingest rate in the load benchmark: the local-mode client and the engine, labelled apart.

local = QdrantBackend.replace_papers on qdrant-client local mode (QdrantClient(path=...), a
Python implementation; what the backend runs here). engine = Qdrant's own engine in-process
(qdrant-edge, the server's storage code, with the backend's payload indexes; no HTTP/gRPC hop),
fed the same vectors and documents. Neither is a Qdrant server.
"""

from __future__ import annotations

import logging
import shutil
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import pyarrow as pa
from qdrant_edge import CountRequest

from benchmarks.load.rows import MODEL_ID
from candlefire_pipeline.backends.common import embedding_matrix
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline_tests.backends.qdrant import engine as qdrant_engine

log = logging.getLogger(__name__)


def _local(rows: pa.Table, root: Path) -> float:
    backend = build_backend("qdrant", path=root / "local", collection="bench_load")
    try:
        backend.ensure_schema(MODEL_ID, embedding_matrix(rows).shape[1])
        started = time.perf_counter()
        backend.replace_papers(rows)
        seconds = time.perf_counter() - started
        if backend.count() != rows.num_rows:
            raise AssertionError(f"qdrant local: {backend.count()} of {rows.num_rows} rows stored")
    finally:
        backend.close()
    return seconds


def _engine(rows: pa.Table, root: Path) -> float:
    matrix = embedding_matrix(rows)
    shard = qdrant_engine.open_shard(root / "engine", matrix.shape[1])
    try:
        started = time.perf_counter()
        qdrant_engine.load(shard, rows["document"].to_pylist(), matrix)
        seconds = time.perf_counter() - started
        if shard.count(CountRequest(exact=True)) != rows.num_rows:
            raise AssertionError("qdrant engine: not every row stored")
    finally:
        shard.close()
    return seconds


def measure_qdrant(rows: pa.Table, repeats: int) -> dict[str, list[float]]:
    """Seconds per fresh load, local and engine alternating, each in a new temp dir."""
    seconds: dict[str, list[float]] = {"local": [], "engine": []}
    for repeat in range(repeats):
        for kind, run in (("local", _local), ("engine", _engine)):
            root = Path(tempfile.mkdtemp(prefix=f"bench-load-qdrant-{kind}-"))
            try:
                seconds[kind].append(run(rows, root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            log.info("qdrant %s repeat %d: %.2f s", kind, repeat, seconds[kind][-1])
    return seconds


def qdrant_markdown(n: int, seconds: dict[str, list[float]]) -> str:
    client, engine = version("qdrant-client"), version("qdrant-edge-py")
    rates = {kind: n / statistics.median(s) for kind, s in seconds.items()}
    return (
        f"Qdrant: {n:,} of the same rows into a fresh collection, median of"
        f" {len(seconds['local'])} alternating repeats. local = qdrant-client {client}"
        " local mode through `QdrantBackend.replace_papers` (Python; what the backend runs"
        f" here); engine = qdrant-edge {engine} in-process (Qdrant's storage engine, same"
        " payload indexes, no server round trips). Neither is a Qdrant server.\n\n"
        "| Qdrant | rows/s |\n|---|---:|\n"
        f"| local mode (client) | {rates['local']:,.0f} |\n"
        f"| engine (qdrant-edge) | {rates['engine']:,.0f} |"
    )
