"""The writer's matching in numpy: pgvector's binary vectors read in one buffer and sent as one
`vector[]`, and which (entry, new row) pairs may change an entry."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from candlefire_pipeline.backends.pg.connect import open_connection
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD
from candlefire_pipeline.backends.pg.terms.matching import (
    Kept,
    VectorArray,
    _unit_vectors,
    find_pairs,
    register_vector_array,
)


def sent(values: list[float]) -> bytes:
    """pgvector's vector_send: int16 dim, int16 unused, big-endian float32s."""
    return struct.pack(f">hh{len(values)}f", len(values), 0, *values)


def test_binary_vectors_are_read_as_unit_rows_and_a_missing_one_as_zeros():
    matrix = _unit_vectors((sent([3.0, 4.0]), None, sent([0.0, 2.0])), 2)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(matrix, [[0.6, 0.8], [0.0, 0.0], [0.0, 1.0]], rtol=1e-6)


def kept(**columns) -> Kept:
    base = dict(
        ids=np.asarray([10, 11, 12]), kinds=np.asarray([KEYWORD, KEYWORD, ENTITY], dtype=object),
        modes=["like", "like", ""], texts=["SOD1", "TDP", "name"],
        listed=np.asarray([True, False, True]), takes_all=np.asarray([False, False, False]),
        last=np.asarray([0.1, -np.inf, 0.1]), open_witness=np.asarray([False, False, True]),
        open_abstract=np.asarray([False, True, True]), touched=np.zeros(3, dtype=bool),
        firsts=np.asarray([True, False, False]),
        vectors=np.asarray([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=np.float32),
    )  # fmt: skip
    return Kept(**{**base, **columns})


def added(rows: list[tuple[str, int, str, list[float]]]) -> pa.Table:
    return pa.table({
        "chunk_id": [r[0] for r in rows], "chunk_index": [r[1] for r in rows],
        "document": [r[2] for r in rows],
        "embedding": pa.array([r[3] for r in rows], type=pa.list_(pa.float32(), 2)),
    })  # fmt: skip


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # near the variant's vector and holding it: a keyword pair and an entity pair, both near
        (("a", 1, "has SOD1", [1.0, 0.05]), {(10, True), (12, True)}),
        # holding it but far: it cannot enter the list and the witness is known, so nothing
        (("b", 1, "has SOD1", [0.0, 1.0]), set()),
        # far, holding a grounding-only variant as an abstract: a witness pair, not near
        (("c", 0, "has TDP", [0.0, 1.0]), {(11, False)}),
        # holding no variant, near the entity name
        (("d", 1, "nothing", [1.0, 0.0]), {(12, True)}),
    ],
)
def test_pairs_are_the_ones_that_may_change_an_entry(row, expected):
    pairs = find_pairs(kept(), added([row]))
    assert set(zip(pairs.entries.tolist(), pairs.near.tolist(), strict=True)) == expected


@pytest.mark.parametrize(
    ("chunk_index", "carried", "expected"), [(0, True, [10]), (0, False, []), (1, True, [])]
)
def test_a_far_holder_rewritten_in_place_pairs_with_an_entry_that_knows_its_first_abstract(
    chunk_index, carried, expected
):
    """Deleted and written again by the same write, it keeps its place: it may precede the
    entry's first abstract holder."""
    row = added([("b", chunk_index, "has SOD1", [0.0, 1.0])])
    pairs = find_pairs(kept(), row, carried=np.asarray([carried]))
    assert pairs.entries.tolist() == expected


def test_a_complete_list_takes_every_holder_however_far():
    pairs = find_pairs(kept(takes_all=np.asarray([True, False, False])),
                       added([("b", 1, "has SOD1", [0.0, 1.0])]))  # fmt: skip
    assert (pairs.entries.tolist(), pairs.near.tolist()) == ([10], [True])


def test_only_the_vectors_of_held_listed_variants_are_asked_for():
    asked = []

    def vectors_of(at: np.ndarray) -> np.ndarray:
        asked.append(at.tolist())
        return kept().vectors[at]

    # the writer's Kept has no keyword vectors: only the entity name's row is filled
    entities_only = kept(vectors=np.asarray([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]], np.float32))
    row = added([("a", 1, "has SOD1 and TDP", [1.0, 0.05])])
    pairs = find_pairs(entities_only, row, vectors_of)
    assert asked == [[0]]  # TDP is held too, but keeps no list: no vector to compare with
    expected = find_pairs(kept(), row)
    assert (pairs.entries.tolist(), pairs.near.tolist()) == (
        expected.entries.tolist(), expected.near.tolist(),
    )  # fmt: skip
    assert find_pairs(entities_only, added([("d", 1, "nothing", [1.0, 0.0])]), vectors_of)
    assert len(asked) == 1  # no document held a variant: nothing read


@pytest.mark.parametrize("rows", [1, 7])
def test_a_packed_vector_array_arrives_as_the_same_float32_values(pg_dsn, rows):
    rng = np.random.default_rng(rows)
    matrix = rng.normal(size=(rows, 5)).astype(np.float32)
    matrix[0, 0] = np.float32(1e-38)  # a subnormal-adjacent value survives too
    with open_connection(pg_dsn) as conn:
        register_vector_array(conn)
        sent_back = conn.execute(
            "SELECT vector_send(v) FROM unnest(%s::vector[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
            [VectorArray(conn, matrix)],
        ).fetchall()
    values = [np.frombuffer(row[0][4:], dtype=">f4") for row in sent_back]
    np.testing.assert_array_equal(np.stack(values), matrix)  # bit for bit, not approximately
