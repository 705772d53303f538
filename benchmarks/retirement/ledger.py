"""The unretire benchmark's ledger: the workload written as ingest batch files (what the
pipeline's asset steps leave in data/batches), and Chroma put in the state `retire` leaves it in.

A batch holds papers.parquet, chunks.parquet, embeddings.parquet (the vectors: nothing is
embedded again) and an empty deleted.parquet, as corpus/drops.py and the embedding stage write
them; the drops are disjoint slices of the corpus (whole papers), keys sorting in drop order.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.corpus.schema import (
    CHUNK_SCHEMA,
    DELETED_SCHEMA,
    PAPER_SCHEMA,
    embedding_schema,
)
from candlefire_pipeline.operations.serving.state import PROMOTED, Retirement, ServingState
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import REFERENCE

#: When the benchmark's Chroma was retired (the switch records it; nothing reads the date).
RETIRED_SINCE = "2026-01-15T00:00:00+00:00"


def batch_key(number: int) -> str:
    return f"drop-{number:04d}"


def papers_table(rows: pa.Table) -> pa.Table:
    """One row per paper of the chunks (its first chunk's fields): papers.parquet."""
    first = pc.equal(rows["chunk_index"], 0)
    heads = rows.filter(first)
    n = heads.num_rows
    empty_lists = pa.array([[]] * n, pa.list_(pa.string()))
    columns = {
        "pmid": heads["pmid"], "title": heads["title"], "abstract": heads["document"],
        "authors": empty_lists, "year": heads["year"], "doi": heads["doi"],
        "mesh_terms": empty_lists, "full_text": pa.nulls(n, pa.string()),
        "citation_count": heads["citation_count"], "entity_names": empty_lists,
        "record_no": pa.array(range(1, n + 1), pa.int64()), "paper_hash": heads["paper_hash"],
    }  # fmt: skip
    return pa.Table.from_pydict(columns, schema=PAPER_SCHEMA)


def write_batch(batch_dir: Path, rows: pa.Table) -> None:
    """One drop's batch files from store rows (chunk columns, model and vector)."""
    if rows.num_rows and pc.count_distinct(rows["pmid"]).as_py() != papers_table(rows).num_rows:
        raise ValueError(f"{batch_dir.name}: every paper needs its chunk 0 in the same drop")
    batch_dir.mkdir(parents=True, exist_ok=True)
    dim = rows.schema.field("embedding").type.list_size
    embeddings = pa.Table.from_arrays(
        [rows["chunk_id"], rows["content_hash"], rows["model_id"],
         pa.array([dim] * rows.num_rows, pa.int32()), rows["embedding"]],
        schema=embedding_schema(dim),
    )  # fmt: skip
    pq.write_table(papers_table(rows), batch_dir / "papers.parquet")
    pq.write_table(rows.select(CHUNK_SCHEMA.names).cast(CHUNK_SCHEMA), batch_dir / "chunks.parquet")
    pq.write_table(embeddings, batch_dir / "embeddings.parquet")
    pq.write_table(DELETED_SCHEMA.empty_table(), batch_dir / "deleted.parquet")


def write_batches(slices: Iterable[pa.Table], batches_dir: Path) -> list[str]:
    """Each slice one drop's batch (drop-0001, ...); the keys in drop order."""
    keys = []
    for number, rows in enumerate(slices, start=1):
        keys.append(batch_key(number))
        write_batch(Path(batches_dir) / keys[-1], rows)
    return keys


def drop_rows(size: int, drops: int) -> int:
    """Rows per slice so that `size` chunks make `drops` drops (the last one may be short)."""
    if drops < 1 or size < drops:
        raise ValueError(f"{size} chunks cannot make {drops} drops")
    return -(-size // drops)


def forget_store(batches_dir: Path, keys: Sequence[str], store: str) -> None:
    """The ledger as if the store had never been written: no marker of it in any batch."""
    ledger = StoreLedger(batches_dir, store)
    for key in keys:
        for marker in (ledger.applied_marker, ledger.intent_marker, ledger.passed_over_marker):
            (Path(batches_dir) / key / marker).unlink(missing_ok=True)


def retire_chroma(settings: Settings, passed_over: Sequence[str], folder: Path | None) -> None:
    """Chroma as `retire` leaves it once drops passed it over: the switch records the
    retirement (pgvector promoted), each passed-over drop has its pass-over marker instead of
    an applied one, and the folder is `folder`'s copy (None: deleted, as --delete-files does)."""
    ledger = StoreLedger(settings.batches_dir, REFERENCE)
    for key in passed_over:
        (settings.batches_dir / key / ledger.applied_marker).unlink(missing_ok=True)
        ledger.pass_over(key, {"retired_since": RETIRED_SINCE})
    retired = {REFERENCE: Retirement(RETIRED_SINCE, "bench-soak")}
    state = ServingState(PROMOTED, RETIRED_SINCE, "bench", "bench: Chroma retired", "bench",
                         "retire", retired=retired)  # fmt: skip
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text(state.to_json())
    shutil.rmtree(settings.chroma_path, ignore_errors=True)
    if folder is not None:
        shutil.copytree(folder, settings.chroma_path)
