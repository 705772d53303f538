"""Arrow schemas of the per-batch parquet files; every stage agrees on these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

#: Accepted papers of one batch (papers.parquet).
PAPER_SCHEMA = pa.schema(
    [
        ("pmid", pa.string()),
        ("title", pa.string()),
        ("abstract", pa.string()),
        ("authors", pa.list_(pa.string())),
        ("year", pa.int32()),  # null when unknown
        ("doi", pa.string()),  # "" when unknown
        ("mesh_terms", pa.list_(pa.string())),
        ("full_text", pa.string()),  # null when abstract-only
        ("citation_count", pa.int32()),
        ("entity_names", pa.list_(pa.string())),
        ("record_no", pa.int64()),  # 1-based position of the record in the drop file
        ("paper_hash", pa.string()),  # sha256 hex of the canonical JSON of the fields above it
    ]
)

#: Rejected records of one batch (rejects.parquet); accepted + rejected = records in.
REJECT_SCHEMA = pa.schema(
    [
        ("record_no", pa.int64()),
        ("pmid", pa.string()),  # null when it could not be read
        ("reason", pa.string()),
        ("excerpt", pa.string()),  # at most 200 characters of the raw record
    ]
)

#: PMIDs a MEDLINE DeleteCitation removes (deleted.parquet).
DELETED_SCHEMA = pa.schema([("pmid", pa.string())])

#: One row per chunk (chunks.parquet).
CHUNK_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("pmid", pa.string()),
        ("section", pa.string()),
        ("chunk_index", pa.int32()),
        ("title", pa.string()),
        ("year", pa.int32()),
        ("doi", pa.string()),
        ("citation_count", pa.int32()),
        ("entity_names", pa.string()),  # comma-joined
        ("mesh_terms", pa.string()),  # first 10, comma-joined
        ("has_full_text", pa.bool_()),
        ("document", pa.string()),
        ("content_hash", pa.string()),  # sha256 hex of document + metadata + CHUNKER_VERSION
        ("paper_hash", pa.string()),
    ]
)


def embedding_schema(dim: int) -> pa.Schema:
    """One row per chunk (embeddings.parquet), aligned with chunks.parquet row for row."""
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("content_hash", pa.string()),
            ("model_id", pa.string()),
            ("dim", pa.int32()),
            ("embedding", pa.list_(pa.float32(), dim)),  # L2-normalized
        ]
    )


def store_schema(dim: int) -> pa.Schema:
    """What a backend's replace_papers receives: chunk columns + batch key + model + vector."""
    return pa.schema(
        list(CHUNK_SCHEMA)
        + [
            pa.field("batch_key", pa.string()),
            pa.field("model_id", pa.string()),
            pa.field("embedding", pa.list_(pa.float32(), dim)),
        ]
    )


def vector_column(vectors: np.ndarray, dim: int | None = None) -> pa.FixedSizeListArray:
    """A (rows x dim) matrix as the fixed-size float32 list column of store/embedding tables."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if dim is None:
        dim = matrix.shape[1] if matrix.ndim == 2 else 0
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), dim)


def store_rows(
    chunks: pa.Table | Sequence[Mapping],
    vectors: np.ndarray | pa.Array | pa.ChunkedArray,
    batch_key: str,
    model_id: str,
    dim: int | None = None,
) -> pa.Table:
    """store_schema(dim) rows: chunk columns (a CHUNK_SCHEMA table or dicts) + vectors row for row.

    `vectors` is a (rows x dim) matrix or an Arrow fixed-size list column; `dim` defaults to
    its width. Fields of CHUNK_SCHEMA missing from a dict become null.
    """
    if isinstance(chunks, pa.Table):
        table = chunks.select(CHUNK_SCHEMA.names).cast(CHUNK_SCHEMA)
    else:
        table = pa.Table.from_pylist(list(chunks), schema=CHUNK_SCHEMA)
    if isinstance(vectors, pa.Array | pa.ChunkedArray):
        column = vectors
        dim = vectors.type.list_size if dim is None else dim
    else:
        column = vector_column(vectors, dim)
        dim = column.type.list_size
    if len(column) != table.num_rows:
        raise ValueError(f"{table.num_rows} chunks but {len(column)} vectors")
    n = table.num_rows
    return pa.Table.from_arrays(
        table.columns
        + [
            pa.array([batch_key] * n, pa.string()),
            pa.array([model_id] * n, pa.string()),
            column,
        ],
        schema=store_schema(dim),
    )
