"""Applies one ingest batch's embeddings to a vector store: replace by paper, in batch order.

A store without transactions (Chroma) can be left half-written by a crash. Before its first
write, an apply leaves an intent marker in the ledger (corpus/ledger.py: StoreLedger.begin) and
removes it once the batch is recorded as applied; the next apply of any batch to that store
first finishes every batch whose marker is still there. Whether a paper needs writing is decided
from the chunks the store holds for it (ids and content hashes), so a paper left with old and
new chunks side by side is always rewritten, never taken for up to date.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, store_rows
from candlefire_pipeline.progress import ProgressMeter

log = logging.getLogger(__name__)

#: Loads of more rows than this report progress (COPY slices, Chroma upsert batches).
PROGRESS_MIN_ROWS = 5_000


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
    #: Interrupted earlier applies to this store that were finished first (batch keys).
    resumed: tuple[str, ...] = field(default=())
    #: later-named drops already applied that hold a newer version of some of this batch's
    #: papers (held back: drops apply in file-name order) -> how many papers each
    superseded_by: dict[str, int] = field(default_factory=dict)

    def held_back(self) -> str:
        """The papers a later-named drop held back, for a log line ("" when none)."""
        if not self.papers_superseded:
            return ""
        by = ", ".join(f"{key} ({n})" for key, n in sorted(self.superseded_by.items()))
        return (f"{self.papers_superseded} papers held back by later-named drops already "
                f"applied ({by}): drops apply in file-name order, the later name's version "
                "stays")  # fmt: skip

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
    model_id = model_ids[0] if model_ids else ""
    return store_rows(chunks, embeddings["embedding"], batch_key, model_id, dim)


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
    progress: Callable[[str], None] | None = None,
) -> ApplySummary:
    """Replace the batch's changed papers and apply its deletes, skipping newer versions.

    A paper is skipped when a later batch that this store has applied accepts or deletes it, so
    batches may arrive in any order and the store always equals the ledger view of the
    batches it has applied (expected_chunks); a later batch that never reached the store
    holds nothing back.

    With record_applied (a persistent store), interrupted applies of other batches are
    finished first and this one is recorded (`applied-<store>.json`) when it completes.
    `progress` receives a message at a steady interval while more than PROGRESS_MIN_ROWS rows
    are written (done / total, rate, ETA).
    """
    resumed = ()
    if record_applied:
        resumed = tuple(resume_interrupted(backend, batches_dir, (model_id, dim), skip=batch_key))
    return _apply(
        backend, batches_dir, batch_key, (model_id, dim), record_applied, resumed, progress
    )


def _apply(
    backend: VectorBackend,
    batches_dir: Path,
    batch_key: str,
    model: tuple[str, int] | None,
    tracked: bool,
    resumed: tuple[str, ...] = (),
    progress: Callable[[str], None] | None = None,
) -> ApplySummary:
    """One batch; model None takes the rows' own model (the store still checks its contract)."""
    started = time.perf_counter()
    batch_dir = batches_dir / batch_key
    rows = read_store_rows(batch_dir, batch_key)
    model = _checked_model(rows, model, batch_key)
    if model[0]:
        backend.ensure_schema(*model)
    deleted = pq.read_table(batch_dir / "deleted.parquet")["pmid"].to_pylist()
    pmids = set(pc.unique(rows["pmid"]).to_pylist())
    ledger = StoreLedger(batches_dir, backend.name)
    superseding = ledger.superseding(batch_key, pmids | set(deleted))
    superseded = set().union(*superseding.values())
    unchanged = _unchanged(backend, rows, pmids - superseded)
    to_write = pmids - superseded - unchanged
    # A pmid both deleted and accepted here was re-added after its delete in this file (the
    # reader keeps the last of the two): replace_papers drops its older chunks, or it is unchanged.
    to_delete = sorted(set(deleted) - superseded - pmids)
    if tracked and (to_write or to_delete):
        ledger.begin(batch_key, {"batch_key": batch_key, "started": time.time()})
    keep = pc.is_in(rows["pmid"], value_set=pa.array(sorted(to_write), pa.string()))
    written = _write(backend, rows.filter(keep), progress) if to_write else 0
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
        resumed=resumed,
        superseded_by={key: len(held) for key, held in superseding.items()},
    )
    if tracked:
        ledger.finish(batch_key, asdict(summary))
    log.info(
        "%s <- %s: %d rows, %d papers replaced, %d unchanged, %d superseded, %d deleted",
        backend.name, batch_key, written, len(to_write), len(unchanged),
        summary.papers_superseded, len(to_delete),
    )  # fmt: skip
    if summary.papers_superseded:
        log.warning("%s <- %s: %s", backend.name, batch_key, summary.held_back())
    return summary


def _checked_model(
    rows: pa.Table, model: tuple[str, int] | None, batch_key: str
) -> tuple[str, int]:
    """The model to write under: the configured one, which the rows must have been made with
    (None: the rows' own)."""
    row_model = _stored_model(rows)
    if model is None:
        return row_model
    if rows.num_rows and row_model != model:
        raise ValueError(
            f"{batch_key}: embeddings were made with {row_model[0]} ({row_model[1]}-dim) but the "
            f"pipeline is configured for {model[0]} ({model[1]}-dim); re-materialize embeddings"
        )
    return model


def _write(backend: VectorBackend, rows: pa.Table, progress: Callable[[str], None] | None) -> int:
    if progress is None or rows.num_rows <= PROGRESS_MIN_ROWS:
        return backend.replace_papers(rows)
    meter = ProgressMeter(f"{backend.name} load", rows.num_rows, progress, unit="rows")
    written = backend.replace_papers(rows, progress=meter.update)
    meter.finish()
    return written


def _unchanged(backend: VectorBackend, rows: pa.Table, candidates: set[str]) -> set[str]:
    """Papers whose stored chunks (ids, content hashes) and paper_hash equal this batch's."""
    if not candidates:
        return set()
    wanted = sorted(candidates)
    stored_chunks = backend.paper_chunks(wanted)
    stored_papers = backend.paper_hashes(wanted)
    columns = ("pmid", "chunk_id", "content_hash", "paper_hash")
    batch: dict[str, dict[str, str]] = {}
    paper_of: dict[str, str] = {}
    for pmid, chunk_id, digest, paper in zip(*(rows[c].to_pylist() for c in columns), strict=True):
        batch.setdefault(pmid, {})[chunk_id] = digest
        paper_of[pmid] = paper
    return {
        pmid
        for pmid in candidates
        if stored_chunks.get(pmid) == batch[pmid] and stored_papers.get(pmid) == paper_of[pmid]
    }


def resume_interrupted(
    backend: VectorBackend,
    batches_dir: Path,
    model: tuple[str, int] | None,
    skip: str | None = None,
) -> list[str]:
    """Finish, in batch order, every interrupted apply to this store; return their keys.

    A batch that can no longer be applied from its files (re-materialized halfway, another
    model) is logged and left marked: the store checks and `candlefire repair` still see it.
    """
    done = []
    for key in StoreLedger(batches_dir, backend.name).interrupted():
        if key == skip:
            continue
        log.warning("%s: finishing the interrupted apply of batch %s", backend.name, key)
        try:
            _apply(backend, batches_dir, key, model, tracked=True)
        except (ValueError, OSError) as exc:
            log.warning("%s: batch %s cannot be re-applied now: %s", backend.name, key, exc)
            continue
        done.append(key)
    return done
