"""Fault: the run worker is SIGKILLed while its backend runs a long statement (a CREATE INDEX,
an HNSW build). Postgres left such a backend running, holding its locks, so the next run found
the phrase index "being built by another session" and the invalid index stayed (a crash drill
found it). Every store connection now asks the server to end a dead client's statement."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import psycopg

from candlefire_pipeline.backends.pg.connect import CLIENT_CHECK_MS, connect
from candlefire_pipeline_tests.reliability.helpers import wait_for

#: A worker that takes a build's advisory lock through the product's connection and then runs
#: a statement far longer than the test waits (the stand-in for a long index build).
WORKER = """
import sys
from candlefire_pipeline.backends.pg.connect import connect
conn = connect(sys.argv[1])
conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [sys.argv[2]])
print("locked", flush=True)
conn.execute("SELECT pg_sleep(600)")
"""


def _lock_is_free(dsn: str, key: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        free = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [key]).fetchone()[0]
        if free:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [key])
        return free


def _sleeping(dsn: str, key: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
            " WHERE l.locktype = 'advisory' AND l.objid::int = hashtext(%s)"
            " AND a.query LIKE 'SELECT pg_sleep%%' AND a.state = 'active'",
            [key],
        ).fetchone()[0]
    return found == 1


def test_a_killed_workers_statement_ends_and_frees_its_locks(pg_dsn):
    key = f"candlefire:phrase:killed-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, pg_dsn, key], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout.readline() == "locked\n"
        wait_for(lambda: _sleeping(pg_dsn, key), "the worker's long statement", lambda: True)
        assert not _lock_is_free(pg_dsn, key)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        # without the check the backend sleeps on for 600 s, holding the lock past this bound
        wait_for(lambda: _lock_is_free(pg_dsn, key), "the orphan's lock released", lambda: True)
    finally:
        worker.kill()
        worker.wait()


def test_every_store_connection_checks_for_its_client(pg_dsn):
    with connect(pg_dsn) as conn:
        shown = conn.execute("SHOW client_connection_check_interval").fetchone()[0]
    assert shown == f"{CLIENT_CHECK_MS // 1000}s"
