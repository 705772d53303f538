"""What the Chroma store keeps as a chunk's metadata: its keys and value types (no chromadb here,
so a reader that only needs the keys does not load it).

Every key is written on every upsert: str, int and bool values, and `year` None when unknown.
Chroma's upsert MERGES metadata into an existing record (chromadb 1.5.9, measured): a key left
out would keep the value a replaced chunk had before, while None removes it (and is not stored
on a new record).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # an annotation only: the app's read path imports META_KEYS without pyarrow
    import pyarrow as pa

#: Metadata keys written per chunk (`year` absent when unknown: Chroma stores no None).
META_KEYS = (
    "pmid", "section", "chunk_index", "title", "year", "doi", "citation_count", "entity_names",
    "mesh_terms", "has_full_text", "content_hash", "paper_hash", "batch_key", "model_id",
)  # fmt: skip


def scalar_metadata(rows: pa.Table) -> list[dict[str, Any]]:
    """One upsert metadata dict per row: str/int/bool values, `year` None when unknown."""
    return rows.select(list(META_KEYS)).to_pylist()
