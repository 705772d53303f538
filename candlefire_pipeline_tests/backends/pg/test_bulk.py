"""The COPY path: encoder/sender overlap, exact vectors per storage type, the first-build shape."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import psycopg
import pytest
from psycopg import sql

from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg.bulk import BUILD_MEMORY_MAX_MB, build_memory_mb, prefetched
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors


def test_prefetched_keeps_order_and_bounds_how_far_it_runs_ahead():
    produced: list[int] = []

    def source():
        for i in range(50):
            produced.append(i)
            yield i

    seen = []
    for item in prefetched(source(), depth=2):
        time.sleep(0.001)
        # the producer is at most the queue depth + the one item it holds ahead of us
        assert len(produced) - len(seen) <= 2 + 2
        seen.append(item)
    assert seen == list(range(50))


def test_prefetched_raises_the_producers_error_after_its_items():
    def source():
        yield 1
        yield 2
        raise ValueError("bad slice")

    seen = []
    with pytest.raises(ValueError, match="bad slice"):
        for item in prefetched(source(), depth=4):
            seen.append(item)
    assert seen == [1, 2]


def test_prefetched_stops_its_thread_when_the_consumer_fails():
    def endless():
        i = 0
        while True:
            i += 1
            yield i

    def encoders() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "copy-encoder" and t.is_alive()}

    # its own thread only: other tests' background threads come and go in this process
    before = encoders()
    with pytest.raises(RuntimeError, match="server gone"):
        for item in prefetched(endless(), depth=2):
            if item == 5:
                (started,) = encoders() - before
                raise RuntimeError("server gone")
    started.join(timeout=120)  # a bound on waiting, not a performance assertion
    assert not started.is_alive()


def test_prefetched_of_nothing_is_nothing():
    assert list(prefetched(iter(()), depth=2)) == []


def stored_vectors(store, n: int) -> np.ndarray:
    query = sql.SQL("SELECT embedding::vector FROM {t} ORDER BY chunk_id").format(
        t=store.names.ident()
    )
    return np.stack([row[0].to_numpy() for row in store.conn.execute(query).fetchall()][:n])


@pytest.mark.parametrize("vector_type", ["vector", "halfvec"])
@pytest.mark.parametrize("bulk", [False, True], ids=["incremental", "first-build"])
def test_copy_stores_each_vector_exactly_as_float32(make_backend, vector_type, bulk):
    """Whatever the index precision, the column keeps the float32 vector bit for bit."""
    ann = AnnParams(vector_type=vector_type)
    store = make_backend("pgvector", ann=ann, bulk_rebuild_rows=100 if bulk else 100_000)
    n = 2_500  # several COPY slices
    ids = [f"{i:05d}" for i in range(n)]
    vectors = unit_vectors(n, 24, seed=8) * 3.5  # not unit: storage must not normalize
    store.replace_papers(make_rows([chunk(i) for i in ids], vectors))
    assert np.array_equal(stored_vectors(store, n), vectors)


def test_first_build_leaves_the_primary_key_enforcing(make_backend):
    store = make_backend("pgvector", bulk_rebuild_rows=10)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(20)], unit_vectors(20, 8)))
    constraint = store.conn.execute(
        "SELECT contype FROM pg_constraint WHERE conname = %s", [f"{store.names.table}_pkey"]
    ).fetchone()
    assert constraint == ("p",)
    duplicate = sql.SQL("INSERT INTO {t} SELECT * FROM {t} WHERE chunk_id = '3'").format(
        t=store.names.ident()
    )
    with pytest.raises(psycopg.errors.UniqueViolation):
        store.conn.execute(duplicate)


@pytest.mark.parametrize(
    ("rows", "dim", "indexed", "expected"),
    [
        (0, 384, "vector", 64),
        (5_000, 384, "vector", 64),
        (62_196, 384, "vector", 256),  # measured: a 64 MB graph spills after 28,353 rows
        (62_196, 384, "halfvec", 256),
        (62_196, 384, "bit", 128),
        (62_196, 768, "vector", 512),
        (1_000_000, 384, "vector", 4096),  # the 1M-chunk cost curve: a 2.1 GB graph
        (1_000_000, 384, "bit", 2048),
        (36_000_000, 384, "vector", 4096),  # capped: a build this big spills to disk
    ],
)
def test_build_memory_is_sized_to_the_graph(rows, dim, indexed, expected):
    assert build_memory_mb(rows, dim, indexed) == expected
    graph = rows * (dim * {"vector": 4, "halfvec": 2, "bit": 1 / 8}[indexed] + 700) / 2**20
    assert expected >= min(graph, BUILD_MEMORY_MAX_MB)


def test_a_graph_spilling_out_of_memory_is_logged(make_backend, monkeypatch, caplog):
    monkeypatch.setattr(pg_bulk, "build_memory_mb", lambda rows, dim, indexed: 1)
    store = make_backend("pgvector", bulk_rebuild_rows=100)
    with caplog.at_level(logging.WARNING, logger="candlefire_pipeline.backends.pg.connect"):
        store.replace_papers(
            make_rows([chunk(str(i)) for i in range(3_000)], unit_vectors(3_000, 8))
        )
    assert any("hnsw graph no longer fits" in r.getMessage() for r in caplog.records)
    assert store.count() == 3_000


def _parts(pmids: list[str], dim: int = 8, model_id: str = "test"):
    vectors = unit_vectors(len(pmids), dim, seed=len(pmids))
    return [make_rows([chunk(p)], vectors[i : i + 1], model_id=model_id) for i, p in
            enumerate(pmids)]  # fmt: skip


def test_load_empty_writes_its_parts_in_order_as_one_build(make_backend):
    store = make_backend("pgvector")
    assert store.load_empty(iter(_parts(["P3", "P1", "P2"])), ("test", 8), 3) == 3
    order = store.conn.execute(
        sql.SQL("SELECT chunk_id FROM {t} ORDER BY seq").format(t=store.names.ident())
    ).fetchall()
    assert [r[0] for r in order] == ["P3", "P1", "P2"]  # the parts' order is the table's
    layout = store.stored_layout()
    assert layout is not None and layout.quantization != "unknown"  # the ANN index was built
    # a table that holds rows is left alone: replace_papers writes it
    assert store.load_empty(iter(_parts(["P9"])), ("test", 8), 1) is None
    assert store.count() == 3 and not store.has_paper("P9")


def test_load_empty_refuses_rows_of_another_model_and_writes_nothing(make_backend):
    store = make_backend("pgvector")
    parts = [*_parts(["P1"]), *_parts(["P2"], model_id="other")]
    with pytest.raises(ValueError, match="rows of other"):
        store.load_empty(iter(parts), ("test", 8), 2)
    assert store.count() == 0  # one transaction: the first part was rolled back too
