"""Applies one ingest batch's embeddings to a vector store: replace by paper, in batch order."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.corpus.ledger import superseded_pmids
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, store_schema
from candlefire_pipeline.fsutil import write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApplySummary:
    store: str
    batch_key: str
    rows_written: int
    papers_replaced: int
    papers_unchanged: int
    papers_superseded: int
    papers_deleted: int
    chunks_deleted: int
    seconds: float
    applied_at: float

    @property
    def rows_per_second(self) -> float:
        return self.rows_written / self.seconds if self.seconds > 0 else 0.0


def read_store_rows(batch_dir: Path, batch_key: str) -> pa.Table:
    """chunks.parquet joined row for row with embeddings.parquet, as store_schema(dim)."""
    chunks = pq.read_table(batch_dir / "chunks.parquet", schema=CHUNK_SCHEMA)
    embeddings = pq.read_table(batch_dir / "embeddings.parquet")
    if chunks.num_rows != embeddings.num_rows or not chunks["chunk_id"].equals(
        embeddings["chunk_id"]
    ):
        raise ValueError(
            f"{batch_dir.name}: embeddings.parquet is not aligned with chunks.parquet "
            f"({embeddings.num_rows} vs {chunks.num_rows} rows); re-materialize embeddings"
        )
    if not chunks["content_hash"].equals(embeddings["content_hash"]):
        raise ValueError(f"{batch_dir.name}: embeddings are stale for changed chunks")
    dim = embeddings.schema.field("embedding").type.list_size
    model_ids = pc.unique(embeddings["model_id"]).to_pylist()
    if len(model_ids) > 1:
        raise ValueError(f"{batch_dir.name}: embeddings mix models {model_ids}")
    n = chunks.num_rows
    model_id = model_ids[0] if model_ids else ""
    columns = chunks.columns + [
        pa.array([batch_key] * n, pa.string()),
        pa.array([model_id] * n, pa.string()),
        embeddings["embedding"],
    ]
    return pa.Table.from_arrays(columns, schema=store_schema(dim))


def _stored_model(rows: pa.Table) -> tuple[str, int]:
    dim = rows.schema.field("embedding").type.list_size
    return (rows["model_id"][0].as_py() if rows.num_rows else ""), dim


def apply_batch(
    backend: VectorBackend,
    batches_dir: Path,
    batch_key: str,
    model_id: str,
    dim: int,
    record_applied: bool = True,
) -> ApplySummary:
    """Replace the batch's changed papers and apply its deletes, skipping papers that a later
    batch already applied to this store changed or deleted (batches may arrive in any order)."""
    started = time.perf_counter()
    batch_dir = batches_dir / batch_key
    rows = read_store_rows(batch_dir, batch_key)
    row_model, row_dim = _stored_model(rows)
    if rows.num_rows and (row_model, row_dim) != (model_id, dim):
        raise ValueError(
            f"{batch_key}: embeddings were made with {row_model} ({row_dim}-dim) but the "
            f"pipeline is configured for {model_id} ({dim}-dim); re-materialize embeddings"
        )
    backend.ensure_schema(model_id, dim)
    deleted = pq.read_table(batch_dir / "deleted.parquet")["pmid"].to_pylist()
    pmids = set(pc.unique(rows["pmid"]).to_pylist())
    superseded = superseded_pmids(
        batches_dir, batch_key, pmids | set(deleted), marker=applied_marker(backend.name)
    )
    stored = backend.paper_hashes(sorted(pmids))
    paper_of = dict(zip(rows["pmid"].to_pylist(), rows["paper_hash"].to_pylist(), strict=True))
    unchanged = {p for p, h in paper_of.items() if stored.get(p) == h} - superseded
    to_write = pmids - superseded - unchanged
    keep = pc.is_in(rows["pmid"], value_set=pa.array(sorted(to_write), pa.string()))
    written = backend.replace_papers(rows.filter(keep)) if to_write else 0
    # A pmid both deleted and accepted here was re-added after its delete in this file (the
    # reader keeps the last of the two): replace_papers already dropped its older chunks.
    to_delete = sorted(set(deleted) - superseded - pmids)
    chunks_deleted = backend.delete_papers(to_delete) if to_delete else 0
    summary = ApplySummary(
        store=backend.name,
        batch_key=batch_key,
        rows_written=written,
        papers_replaced=len(to_write),
        papers_unchanged=len(unchanged),
        papers_superseded=len(superseded & (pmids | set(deleted))),
        papers_deleted=len(to_delete),
        chunks_deleted=chunks_deleted,
        seconds=time.perf_counter() - started,
        applied_at=time.time(),
    )
    if record_applied:
        _record_applied(batch_dir, summary)
    log.info(
        "%s <- %s: %d rows, %d papers replaced, %d unchanged, %d superseded, %d deleted",
        backend.name, batch_key, written, len(to_write), len(unchanged),
        summary.papers_superseded, len(to_delete),
    )  # fmt: skip
    return summary


def applied_marker(store: str) -> str:
    """The file in a batch directory that records the batch was applied to `store`."""
    return f"applied-{store}.json"


def _record_applied(batch_dir: Path, summary: ApplySummary) -> None:
    path = batch_dir / applied_marker(summary.store)
    write_atomic(path, json.dumps(asdict(summary), indent=2))


def applied_batches(batches_dir: Path, store: str) -> dict[str, float]:
    """batch_key -> when it was last applied to `store` (epoch seconds)."""
    out: dict[str, float] = {}
    for marker in sorted(batches_dir.glob(f"*/{applied_marker(store)}")):
        out[marker.parent.name] = json.loads(marker.read_text())["applied_at"]
    return out


def latest_applied_at(batches_dir: Path, stores: tuple[str, ...]) -> float | None:
    """When any of `stores` last received an ingest batch, or None if never."""
    times = [t for s in stores for t in applied_batches(batches_dir, s).values()]
    return max(times, default=None)
