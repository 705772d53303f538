"""Binary COPY payloads built column-wise from Arrow buffers (no Python object per row).

A binary COPY tuple is: int16 field count, then per field int32 byte length (-1 for NULL) and
the value in the type's binary send format. pgvector's vector is uint16 dim, uint16 unused (0),
then dim big-endian float32. The fixed-width fields are packed with one numpy
structured array; each text field gets a 4-byte length prefix; Arrow's binary_join_element_wise
then concatenates all fields of a row, so the joined array's data buffer IS the COPY payload.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from candlefire_pipeline.backends.common import embedding_matrix

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow loads in the functions that encode rows (the write side): the app's read path imports
# the pgvector backend, hence this module, and must not load it.

#: COPY column order: fixed-width fields first so their bytes sit at fixed offsets.
FIXED_COLUMNS = ("embedding", "chunk_index", "citation_count", "has_full_text")
TEXT_COLUMNS = (
    "chunk_id", "pmid", "section", "title", "doi", "entity_names", "mesh_terms",
    "document", "content_hash", "paper_hash", "batch_key", "model_id",
)  # fmt: skip
COPY_COLUMNS = (*FIXED_COLUMNS, "year", *TEXT_COLUMNS)

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
#: Rows per encoded slice: bounds memory and keeps each Arrow binary array far below 2 GiB.
SLICE_ROWS = 4096


#: Largest finite float16: a half-precision index cannot cast a component beyond it.
HALFVEC_MAX = float(np.finfo(np.float16).max)


def _fixed_dtype(dim: int) -> np.dtype:
    return np.dtype(
        [
            ("nfields", ">i2"),
            ("vec_len", ">i4"), ("vec_dim", ">u2"), ("vec_unused", ">u2"), ("vec", ">f4", (dim,)),
            ("idx_len", ">i4"), ("chunk_index", ">i4"),
            ("cit_len", ">i4"), ("citation_count", ">i4"),
            ("ft_len", ">i4"), ("has_full_text", "u1"),
        ]
    )  # fmt: skip


def check_halfvec_range(matrix: np.ndarray) -> None:
    """ValueError when a component does not fit a float16 (it would become infinite)."""
    if matrix.size and float(np.abs(matrix).max()) > HALFVEC_MAX:
        raise ValueError(
            f"rows: a vector component exceeds {HALFVEC_MAX:g}, the largest value a halfvec holds"
        )


def _fixed_part(rows: pa.Table, matrix: np.ndarray) -> pa.Array:
    """Field count + embedding + the int/bool fields of every row, as one binary array."""
    import pyarrow as pa

    dim = matrix.shape[1]
    packed = np.zeros(rows.num_rows, dtype=_fixed_dtype(dim))
    packed["nfields"] = len(COPY_COLUMNS)
    packed["vec_len"] = 4 + packed.dtype["vec"].base.itemsize * dim
    packed["vec_dim"] = dim
    packed["vec"] = matrix
    packed["idx_len"] = packed["cit_len"] = 4
    packed["chunk_index"] = rows["chunk_index"].to_numpy()
    packed["citation_count"] = rows["citation_count"].to_numpy()
    packed["ft_len"] = 1
    packed["has_full_text"] = rows["has_full_text"].to_numpy(zero_copy_only=False)
    width = packed.dtype.itemsize
    raw = pa.py_buffer(packed.view(np.uint8))
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows.num_rows, [None, raw])
    return fixed.cast(pa.binary())


def _year_part(rows: pa.Table) -> pa.Array:
    """The nullable year: length 4 + value, or length -1 and no value bytes."""
    import pyarrow as pa

    year = rows["year"].combine_chunks()
    valid = year.is_valid().to_numpy(zero_copy_only=False)
    packed = np.zeros(len(year), dtype=[("len", ">i4"), ("val", ">i4")])
    packed["len"] = np.where(valid, 4, -1)
    packed["val"] = year.fill_null(0).to_numpy()
    keep = np.ones((len(year), 8), dtype=bool)
    keep[~valid, 4:] = False
    data = packed.view(np.uint8).reshape(len(year), 8)[keep]
    offsets = np.zeros(len(year) + 1, dtype=np.int32)
    np.cumsum(np.where(valid, 8, 4), out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.BinaryArray.from_buffers(pa.binary(), len(year), buffers)


def _text_parts(rows: pa.Table, name: str) -> tuple[pa.Array, pa.Array]:
    """(4-byte big-endian length, utf-8 bytes) of a non-null text column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = rows[name].combine_chunks().cast(pa.binary())
    lengths = pc.binary_length(values).to_numpy().astype(">i4")
    prefix = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(4), len(values), [None, pa.py_buffer(lengths)]
    )
    return prefix.cast(pa.binary()), values


def encode_rows(rows: pa.Table, matrix: np.ndarray | None = None) -> pa.Buffer:
    """COPY tuples (no header/trailer) of validated store_schema rows, in COPY_COLUMNS order.

    `matrix` is the rows' embedding matrix when the caller already has it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    matrix = embedding_matrix(rows) if matrix is None else matrix
    parts = [_fixed_part(rows, matrix), _year_part(rows)]
    for name in TEXT_COLUMNS:
        parts.extend(_text_parts(rows, name))
    joined = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.binary()))
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)
    start, end = offsets[joined.offset], offsets[joined.offset + len(joined)]
    return joined.buffers()[2][start:end]


def copy_slices(rows: pa.Table, slice_rows: int = SLICE_ROWS) -> Iterator[tuple[int, pa.Buffer]]:
    """(rows encoded so far, COPY tuples of the next slice) until every row is encoded.

    The stream is HEADER, the slices, TRAILER; the caller writes those two itself.
    """
    matrix = embedding_matrix(rows)
    for offset in range(0, rows.num_rows, slice_rows):
        part = matrix[offset : offset + slice_rows]
        done = min(offset + slice_rows, rows.num_rows)
        yield done, encode_rows(rows.slice(offset, slice_rows), part)
