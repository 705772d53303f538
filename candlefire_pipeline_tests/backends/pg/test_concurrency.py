"""One PgVectorBackend shared by threads (the app's reader serves concurrent requests): each
search runs with its own stage's ANN effort, never with the one another thread just set."""

from __future__ import annotations

import threading
import time

from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8
#: full_scan_rows=0: the HNSW path, whose effort is session state
ANN = AnnParams(ef_search=200, ef_search_entities=40, full_scan_rows=0)
WANTED = {"semantic": "200", "entities": "40"}


class RecordingConnection:
    """The backend's connection, logging statements in execution order; after a change of
    hnsw.ef_search it pauses, so another thread gets every chance to run in between."""

    def __init__(self, conn) -> None:
        self._conn, self._lock, self.log = conn, threading.Lock(), []

    def execute(self, query, params=None, **kwargs):
        text = query if isinstance(query, str) else query.as_string(self._conn)
        with self._lock:
            cursor = self._conn.execute(query, params, **kwargs)
            ef = _ef_set(text)
            stage = threading.current_thread().name
            self.log.append(("settings", ef) if ef else ("search", stage))
        if ef:
            time.sleep(0.005)
        return cursor

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _ef_set(text: str) -> str | None:
    marker = "set_config('hnsw.ef_search', '"
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split("'", 1)[0]


def test_threads_sharing_a_backend_search_with_their_own_stage_effort(make_backend):
    store = make_backend("pgvector", ann=ANN)
    vectors = unit_vectors(40, DIM, seed=3)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(40)], vectors))
    store.semantic_candidates(vectors[:1], 5, stage="semantic")  # the table is known now
    recording = RecordingConnection(store._conn)
    store._conn = recording

    turns = threading.Barrier(len(WANTED))

    def search(stage: str) -> None:
        for i in range(15):
            # every round holds one search of each stage, so the stages interleave by
            # construction, whatever order the scheduler runs the threads in
            turns.wait(timeout=60)
            store.semantic_candidates(vectors[i : i + 1], 5, stage=stage)

    threads = [threading.Thread(target=search, args=(s,), name=s) for s in WANTED]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session_ef, searches = "200", 0
    for kind, value in recording.log:
        if kind == "settings":
            session_ef = value
        elif value in WANTED:
            searches += 1
            assert session_ef == WANTED[value], f"a {value} search ran with ef_search {session_ef}"
    assert searches == 30
    # from round 2 on, one stage's search always follows the other's: >= 2 changes of effort
    assert sum(1 for kind, _ in recording.log if kind == "settings") >= 2
