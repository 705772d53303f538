"""Serving is never blocked by maintenance: retrieve() answers, unchanged and without an error,
while `REINDEX INDEX CONCURRENTLY` is in progress on the same table (held in progress by an old
snapshot, so the overlap is certain rather than timed)."""

from __future__ import annotations

import threading
import time

import psycopg

from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.health import reindex_concurrently
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

PAPERS, REQUESTS = 400, 20
WAIT_LIMIT_S = 120.0  # a bound on waiting for the server, not a performance assertion
IN_PROGRESS = """
SELECT phase FROM pg_stat_progress_create_index
WHERE relid = %s::regclass AND command = 'REINDEX CONCURRENTLY'
"""


def filled(make_backend, embedder):
    store = make_backend("pgvector", bulk_rebuild_rows=100)
    chunks = [
        chunk(str(i), document=f"paper {i}: SOD{i % 7} and TDP-43 in motor neurons, gene G{i}")
        for i in range(PAPERS)
    ]
    vectors = embedder.embed([c["document"] for c in chunks])
    store.replace_papers(make_rows(chunks, vectors, model_id=embedder.model_id))
    return store


def queries() -> list[tuple[str, list[str], list[str]]]:
    return [(f"TDP-43 in gene G{i}", [f"SOD{i % 7}"], [f"G{i}"]) for i in range(REQUESTS)]


def test_retrieve_answers_while_a_concurrent_reindex_is_in_progress(make_backend, pg_dsn):
    embedder = load_embedder("hashing-v1")
    store = filled(make_backend, embedder)
    retriever = Retriever(store, embedder)
    expected = [retriever.retrieve(*q).pmids for q in queries()]
    assert all(expected)
    index = f"{store.names.table}_embedding_hnsw"
    old_oid = store.conn.execute("SELECT %s::regclass::oid", [index]).fetchone()[0]

    blocker = psycopg.connect(pg_dsn)  # an old snapshot: the rebuild cannot finish before it
    blocker.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    blocker.execute(f"SELECT count(*) FROM {store.names.table}")
    failures: list[BaseException] = []

    def rebuild() -> None:
        try:
            with connect(pg_dsn) as conn:
                reindex_concurrently(conn, index)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    worker = threading.Thread(target=rebuild)
    worker.start()
    try:
        started, phase = time.monotonic(), None
        while phase is None and time.monotonic() - started < WAIT_LIMIT_S:
            row = store.conn.execute(IN_PROGRESS, [store.names.table]).fetchone()
            phase = row[0] if row else time.sleep(0.1)
        assert phase is not None, "the REINDEX never started"
        served, errors = [], []
        for q in queries():
            try:
                served.append(retriever.retrieve(*q).pmids)
            except Exception as exc:  # counted: there must be none
                errors.append(exc)
        still = store.conn.execute(IN_PROGRESS, [store.names.table]).fetchone()
        assert errors == [] and served == expected
        assert worker.is_alive() and still is not None, "the rebuild ended before serving did"
    finally:
        blocker.rollback()
        blocker.close()
        worker.join(WAIT_LIMIT_S)
    assert not worker.is_alive() and failures == []
    new_oid = store.conn.execute("SELECT %s::regclass::oid", [index]).fetchone()[0]
    assert new_oid != old_oid  # the rebuilt index replaced the old one
    assert [retriever.retrieve(*q).pmids for q in queries()] == expected
