"""Fault: the server is SIGKILLed right after a first full build returns, or in the middle of one.

A first build (replace_papers into an empty table) loads without indexes and builds them after,
in one transaction. Committed means durable; a crash before the commit leaves the store as it was,
and the next run builds it again.
"""

from __future__ import annotations

import signal
import threading
import time

import psutil
import psycopg
import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline_tests.reliability.helpers import WAIT_LIMIT_S, expected_hashes, paper_rows

TABLE = "first_build"
LAYOUTS = {
    "vector": AnnParams(),
    "halfvec": AnnParams(vector_type="halfvec"),
    "binary": AnnParams(quantization="binary"),
}


def kill_server(server: EmbeddedPostgres) -> None:
    """SIGKILL the postmaster and every backend at once: no shutdown path runs anywhere."""
    postmaster = psutil.Process(server.pid)
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes:
        process.send_signal(signal.SIGKILL)
    psutil.wait_procs(processes, timeout=WAIT_LIMIT_S)
    server.stop()  # forget the cached handle: the next `dsn` starts it again (crash recovery)


def index_state(dsn: str) -> dict[str, bool]:
    """index name -> valid, for every index of the table."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = to_regclass(%s)",
            [TABLE],
        ).fetchall()
    return dict(rows)


# _seq orders an abstract's grounding for the app's collection (backends/pg/insertion_order.py)
EXPECTED_INDEXES = {
    f"{TABLE}{s}" for s in ("_pkey", "_pmid_chunk", "_document_trgm", "_seq", "_embedding_hnsw")
}


def assert_built(store: PgVectorBackend, rows, dsn: str) -> None:
    assert store.count() == rows.num_rows
    assert store.chunk_hashes() == expected_hashes(rows)
    assert index_state(dsn) == dict.fromkeys(EXPECTED_INDEXES, True)
    probe = rows.slice(7, 1)
    vector = probe["embedding"].combine_chunks().flatten().to_numpy()
    hits = store.semantic_candidates(vector, 3)[0]
    assert hits[0]["chunk_id"] == probe["chunk_id"][0].as_py()
    assert store.contains([probe["document"][0].as_py()])
    assert store.fetch(Filter(pmids=(probe["pmid"][0].as_py(),)))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_returned_first_build_survives_kill_9(own_pg, layout):
    store = build_backend(
        "pgvector", own_pg.dsn, table=TABLE, ann=LAYOUTS[layout], bulk_rebuild_rows=100
    )
    rows = paper_rows([str(n) for n in range(1, 401)], "v1", sections=3)
    assert store.replace_papers(rows) == rows.num_rows  # took the first-build path (>= 100 rows)
    kill_server(own_pg)

    dsn = own_pg.dsn  # restart on the same data directory
    reopened = build_backend("pgvector", dsn, table=TABLE, ann=LAYOUTS[layout])
    try:
        assert_built(reopened, rows, dsn)
        assert reopened.stored_layout().vector_type == LAYOUTS[layout].vector_type
    finally:
        reopened.close()
        store.close()


def _wait_for_statement(dsn: str, pattern: str, alive) -> None:
    with psycopg.connect(dsn, autocommit=True) as watcher:
        deadline = time.monotonic() + WAIT_LIMIT_S
        while time.monotonic() < deadline:
            active = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s",
                [pattern],
            ).fetchone()[0]
            if active:
                return
            if not alive():
                raise AssertionError(f"the build finished before a statement like {pattern!r}")
            time.sleep(0.01)
    raise AssertionError(f"no statement like {pattern!r} within {WAIT_LIMIT_S:.0f}s")


@pytest.mark.parametrize("schema_first", [False, True], ids=["fresh", "schema-committed"])
def test_kill_9_during_a_first_build_converges_on_the_next_run(own_pg, schema_first):
    # ef_construction at pgvector's maximum makes the HNSW build last long enough to hit
    slow_build = {"hnsw_ef_construction": 1000, "bulk_rebuild_rows": 100}
    store = build_backend("pgvector", own_pg.dsn, table=TABLE, **slow_build)
    rows = paper_rows([str(n) for n in range(1, 1201)], "v1", sections=3, dim=32)
    if schema_first:
        store.ensure_schema("test", 32)
    outcome: list = []
    writer = threading.Thread(target=lambda: outcome.append(_try(store.replace_papers, rows)))
    writer.start()
    _wait_for_statement(own_pg.dsn, "%USING hnsw%", writer.is_alive)
    kill_server(own_pg)
    writer.join(WAIT_LIMIT_S)
    assert not writer.is_alive() and isinstance(outcome[0], psycopg.OperationalError), outcome

    dsn = own_pg.dsn
    store.close()
    rerun = build_backend("pgvector", dsn, table=TABLE, bulk_rebuild_rows=100)
    try:
        # nothing of the interrupted build is visible: no rows, and no table unless it was there
        assert rerun.count() == 0
        assert rerun.stored_model() == (("test", 32) if schema_first else None)
        assert rerun.replace_papers(rows) == rows.num_rows
        assert_built(rerun, rows, dsn)
    finally:
        rerun.close()


def _try(call, *args):
    try:
        return call(*args)
    except Exception as exc:  # the test inspects whatever was raised
        return exc
