"""Which kept entries a write's new chunks may change, found in the writer's process.

One read of the kept texts (binary; the entity names' vectors included), then each new document
is scanned once (Aho-Corasick over the keyword variants, whatever their number) and every new
vector is compared with the kept vectors in numpy (float32, blocks bounded in memory). A keyword
variant's vector is read only when a new document holds it: most variants are held by none, and
reading every vector was half of a small drop's upkeep. A pair is `near` when numpy
puts the chunk within MARGIN of the entry's last member, or the entry takes every candidate:
only near pairs get their exact distance from Postgres (the `<=>` a fresh query computes). A far
pair can never enter the list, so it matters only where it may become a witness; the others are
dropped here, which keeps the exact checks proportional to what can change, not to the holders.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD

if TYPE_CHECKING:
    import ahocorasick
    import pyarrow as pa

# ahocorasick and pyarrow load in the upkeep of a write that uses them: the app's read path
# imports the pgvector backend, hence this module, and must not load them.

#: A pair is near when numpy's float32 cosine puts it this close to the entry's last member:
#: float32 sums in another order differ by ~1e-7, pgvector's from numpy's too.
MARGIN = 1e-4
#: Cells (new rows x kept vectors) per matrix product: bounds its memory (~16 MB of float32).
BLOCK_CELLS = 1 << 22


@dataclass(frozen=True)
class Kept:
    """The kept texts as one read: parallel arrays, one element per entry."""

    ids: np.ndarray  # entry id
    kinds: np.ndarray  # ENTITY / KEYWORD
    modes: list[str]  # a keyword entry's substring mode (like / ilike)
    texts: list[str]
    listed: np.ndarray  # holds a ranked list
    takes_all: np.ndarray  # a complete list: every new candidate enters
    last: np.ndarray  # the last member's distance (-inf: an empty list that takes nobody)
    open_witness: np.ndarray  # no witness, or one this write deleted
    open_abstract: np.ndarray  # no abstract witness, or one this write deleted
    firsts: np.ndarray  # knows its first abstract holder (a re-inserted abstract may precede it)
    touched: np.ndarray  # a deleted chunk is a member or a witness
    #: unit rows: a listed entity name's vector, zeros for the others; None: not read
    vectors: np.ndarray | None


#: The unit vectors of the entries at these indexes of a Kept, in that order.
VectorsOf = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Pairs:
    """(entry id, new row) pairs that may change an entry; `near` ones need an exact distance."""

    entries: np.ndarray
    rows: np.ndarray
    near: np.ndarray

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def none(cls) -> Pairs:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, bool))


def read_kept(conn: psycopg.Connection, names: Names, deleted: list[str], dim: int | None) -> Kept:
    """Every kept entry's matching state in one statement; a listed entity name's vector when
    `dim` is given (each new chunk is compared with all of them).

    Membership is one hashed probe per member over the whole cache (89 ms for 10,000 entries
    and 12,000 deleted ids, buffers cold): an index on the members would be written by every
    keep and every upkeep, and a GIN one makes each search read its pending list."""
    vector = sql.SQL(
        "CASE WHEN kind = {k} AND listed THEN vector_send(vector) END" if dim else "NULL::bytea"
    ).format(k=sql.Literal(ENTITY))
    query = sql.SQL(
        "SELECT id, kind, split_part(recipe, ';', 1), text, listed, complete, cardinality(ids), "
        "distances[cardinality(ids)], witness IS NULL OR witness = ANY(%s::text[]), "
        "abstract_witness IS NULL OR abstract_witness = ANY(%s::text[]), "
        "EXISTS (SELECT 1 FROM unnest({members}) m(id) WHERE m.id = ANY(%s::text[])), {vector}, "
        "abstract_first IS NOT NULL "
        "FROM {e} e"
    ).format(e=schema.terms_table(names), members=schema.members(), vector=vector)
    # binary: a vector arrives as its bytes, not as hex text twice its size to decode
    rows = conn.cursor(binary=True).execute(query, [deleted] * 3).fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [()] * 13
    count = np.asarray(columns[6], dtype=np.int64)
    last = np.asarray([d if d is not None else -np.inf for d in columns[7]], dtype=np.float64)
    return Kept(
        ids=np.asarray(columns[0], dtype=np.int64), kinds=np.asarray(columns[1], dtype=object),
        modes=list(columns[2]), texts=list(columns[3]),
        listed=np.asarray(columns[4], dtype=bool), takes_all=np.asarray(columns[5], dtype=bool),
        last=np.where(count > 0, last, -np.inf),
        open_witness=np.asarray(columns[8], dtype=bool),
        open_abstract=np.asarray(columns[9], dtype=bool),
        touched=np.asarray(columns[10], dtype=bool),
        firsts=np.asarray(columns[12], dtype=bool),
        vectors=_unit_vectors(columns[11], dim) if dim else None,
    )  # fmt: skip


def read_vectors(conn, names: Names, ids: Sequence[int], dim: int) -> np.ndarray:
    """These entries' vectors as unit rows, in the order asked (zeros where one has none)."""
    query = sql.SQL("SELECT id, vector_send(vector) FROM {e} WHERE id = ANY(%s)").format(
        e=schema.terms_table(names)
    )
    found = dict(conn.cursor(binary=True).execute(query, [list(map(int, ids))]).fetchall())
    return _unit_vectors(tuple(found.get(int(i)) for i in ids), dim)


def as_array(value) -> np.ndarray:
    """A vector column's value as float32 (pgvector's binary loader gives a Vector object)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def _unit_vectors(sent: tuple, dim: int) -> np.ndarray:
    """pgvector's binary form (int16 dim, int16 unused, big-endian float32s) as unit rows:
    one buffer for all, where a loader per value costs more than the matrix product."""
    layout = np.dtype([("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", (dim,))])
    present = np.asarray([value is not None for value in sent], dtype=bool)
    matrix = np.zeros((len(sent), dim), dtype=np.float32)
    if present.any():
        packed = np.frombuffer(b"".join(v for v in sent if v is not None), dtype=layout)
        matrix[present] = common.unit_rows(packed["values"].astype(np.float32))
    return matrix


class VectorArray:
    """float32 rows as one binary `vector[]` parameter, packed by numpy: psycopg's list dumper
    took 175 ms for 600 vectors of 384 dims, one float at a time."""

    def __init__(self, conn: psycopg.Connection, matrix: np.ndarray) -> None:
        matrix = np.asarray(matrix, dtype=np.float32)
        rows, dim = matrix.shape
        info = conn.adapters.types.get("vector") or TypeInfo.fetch(conn, "vector")
        element = np.dtype([("size", ">i4"), ("dim", ">u2"), ("unused", ">u2"),
                            ("values", ">f4", (dim,))])  # fmt: skip
        packed = np.zeros(rows, dtype=element)
        packed["size"], packed["dim"], packed["values"] = 4 + 4 * dim, dim, matrix
        # array header: 1 dimension, no NULLs, element type (an unsigned oid), length, lower bound
        header = struct.pack(">iiIii", 1, 0, info.oid, rows, 1)
        self.payload = header + packed.tobytes()


class _VectorArrayDumper(Dumper):
    """Sent untyped: the statement's `::vector[]` gives the server its type."""

    format = Format.BINARY

    def dump(self, obj: VectorArray) -> bytes:
        return obj.payload


def register_vector_array(conn: psycopg.Connection) -> None:
    """Let this connection send VectorArray parameters."""
    conn.adapters.register_dumper(VectorArray, _VectorArrayDumper)


def find_pairs(kept: Kept, added: pa.Table, vectors_of: VectorsOf | None = None,
               carried: np.ndarray | None = None) -> Pairs:  # fmt: skip
    """Every (entry, new row) pair that may change an entry, keyword and entity.

    vectors_of gives the unit vectors of the entries at these indexes of `kept` (the writer
    reads the held variants' ones); None: they are in kept.vectors. `carried` marks the new
    rows this write also deleted (they keep their place in insertion order)."""
    abstract = np.asarray(added["chunk_index"].to_numpy(zero_copy_only=False) == 0)
    matrix = common.unit_rows(common.embedding_matrix(added))
    held_e, held_r = _keyword_holders(kept, added["document"].to_pylist())
    near = _near(kept, matrix, held_e, held_r, vectors_of or kept.vectors.__getitem__)
    keep = near | kept.open_witness[held_e] | (kept.open_abstract[held_e] & abstract[held_r])
    if carried is not None:
        keep |= kept.firsts[held_e] & abstract[held_r] & carried[held_r]
    ent_e, ent_r = _entity_pairs(kept, matrix)
    return Pairs(
        entries=kept.ids[np.concatenate([held_e[keep], ent_e])],
        rows=np.concatenate([held_r[keep], ent_r]),
        near=np.concatenate([near[keep], np.ones(len(ent_e), dtype=bool)]),
    )


def _keyword_holders(kept: Kept, documents: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(entry index, row index) for every kept variant a new document holds, per mode."""
    by_mode: dict[str, list[int]] = defaultdict(list)
    for index in np.flatnonzero(kept.kinds == KEYWORD):
        by_mode[kept.modes[index]].append(int(index))
    entries: list[int] = []
    rows: list[int] = []
    for mode, indexes in by_mode.items():
        fold = folding(mode)
        matcher = automaton([(i, kept.texts[i]) for i in indexes], fold)
        for row, document in enumerate(documents):
            found = held(matcher, document, fold)
            entries += found
            rows += [row] * len(found)
    return np.asarray(entries, dtype=np.int64), np.asarray(rows, dtype=np.int64)


def folding(mode: str) -> Callable[[str], str]:
    """How the substring mode compares texts: as they are (LIKE) or case-folded (ILIKE)."""
    return common.fold_case if mode == "ilike" else _same


def _same(text: str) -> str:
    return text


def automaton(entries: list[tuple[int, str]], fold) -> ahocorasick.Automaton:
    """Text (folded) -> the indexes kept under it; an empty text matches nothing here (the
    probe answers it)."""
    import ahocorasick

    indexes_of: dict[str, list[int]] = defaultdict(list)
    for index, text in entries:
        if text:
            indexes_of[fold(text)].append(index)
    matcher = ahocorasick.Automaton()
    for text, indexes in indexes_of.items():
        matcher.add_word(text, indexes)
    matcher.make_automaton()
    return matcher


def held(matcher: ahocorasick.Automaton, document: str, fold) -> set[int]:
    """The indexes whose text the document holds (each document read once)."""
    import ahocorasick

    if matcher.kind != ahocorasick.AHOCORASICK:  # no text at all
        return set()
    return {i for _, found in matcher.iter(fold(document)) for i in found}


def _near(kept: Kept, matrix, entries, rows, vectors_of: VectorsOf) -> np.ndarray:
    """For each pair: a listed entry whose list this row may enter."""
    near = np.zeros(len(entries), dtype=bool)
    listed = np.flatnonzero(kept.listed[entries])
    if not len(listed):
        return near
    wanted = np.unique(entries[listed])
    vectors = vectors_of(wanted)
    step = max(1, BLOCK_CELLS // matrix.shape[1])
    for start in range(0, len(listed), step):
        pair = listed[start : start + step]
        e, r = entries[pair], rows[pair]
        distance = 1.0 - np.einsum("ij,ij->i", vectors[np.searchsorted(wanted, e)], matrix[r])
        near[pair] = kept.takes_all[e] | (distance <= kept.last[e] + MARGIN)
    return near


def _entity_pairs(kept: Kept, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(entry index, row index) where a new chunk may sort before an entity's last member."""
    columns = np.flatnonzero(
        (kept.kinds == ENTITY) & kept.listed & (kept.takes_all | np.isfinite(kept.last))
    )
    if not len(columns) or not len(matrix):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    vectors, takes_all = kept.vectors[columns], kept.takes_all[columns]
    bound = kept.last[columns] + MARGIN
    step = max(1, BLOCK_CELLS // len(columns))
    entries, rows = [], []
    for start in range(0, len(matrix), step):
        distance = 1.0 - matrix[start : start + step] @ vectors.T
        row, col = np.nonzero(takes_all[None, :] | (distance <= bound[None, :]))
        entries.append(columns[col])
        rows.append(row + start)
    return np.concatenate(entries), np.concatenate(rows)
