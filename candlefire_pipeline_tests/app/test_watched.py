"""The collection's process copy of answers (app/local_answers.py), kept current by the change
watch (app/watch.py): repeated calls are answered with no round trip and identically to a
collection that asks Postgres every time; a write committed between two calls, by this process or
another, is seen once its notification arrives, and never later than the staleness bound after
its commit, even with notifications lost; a rollback moves the next call; a lost watch makes
every call ask Postgres until it is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import psycopg
import pytest

from benchmarks.app import search_path as app
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.operations.serving.state import PINNED
from candlefire_pipeline.settings import AppClientSettings
from candlefire_pipeline_tests.app.corpus import (
    SeededEmbedder,
    changing_deployment,
    promote_directly,
)
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

pytestmark = pytest.mark.server

ROWS = ["documents", "metadatas", "distances"]
REQUESTS = [
    ("motor neuron survival in mice", ["C9orf72", "SOD1"], ["G93A", "TDP-43"]),
    ("edaravone trial cohort", ["riluzole", "FUS"], ["SPG 302", "ALS"]),
]


def watched(settings, **client):
    return replace(settings, app_client=AppClientSettings(**client))


def strict(settings):
    return replace(settings, app_client=AppClientSettings(staleness_ms=0))


@pytest.fixture
def changing(tmp_path, pg_dsn):
    """A small deployment of its own (these tests write to it) and its real Chroma collection."""
    with changing_deployment(tmp_path, pg_dsn, seed=13) as made:
        yield made


def write(settings, chunks=None, deleted=None) -> int:
    """The pgvector table written as a drop would; the content version it committed."""
    embedder = SeededEmbedder()
    with opened_backend("pgvector", settings) as store:
        if chunks:
            vectors = np.asarray(embedder.embed([c["document"] for c in chunks]))
            store.replace_papers(make_rows(chunks, vectors, model_id=embedder.model_id,
                                           dim=embedder.dim))  # fmt: skip
        if deleted:
            store.delete_papers(deleted)
        return version_of(store.conn, settings.pg_table)


def version_of(conn, table: str) -> int:
    return conn.execute(f"SELECT content_version FROM {table}_meta").fetchone()[0]


def proven(collection) -> None:
    """Wait until the watch has proven the table's content once (it starts in the background)."""
    store = collection._follower.current()[0]
    deadline = time.monotonic() + 30
    while store.watch.current() is None:
        assert time.monotonic() < deadline, "the watch never read the version"
        time.sleep(0.005)


def holders_call(word: str, n: int = 10) -> dict:
    return {"query_texts": [word], "n_results": n, "include": ROWS,
            "where_document": {"$contains": word}}  # fmt: skip


def test_repeated_requests_are_answered_from_the_copy_as_postgres_answers_them(changing):
    deployment, _ = changing
    settings, embedder = deployment.settings, SeededEmbedder()
    with (ServingCollection(strict(settings), SeededEmbedder()) as asking,
          ServingCollection(watched(settings), embedder) as copying):  # fmt: skip
        expected = [app.answer(asking, *r) for r in REQUESTS]
        proven(copying)
        first = [app.answer(copying, *r) for r in REQUESTS]
        store = copying._follower.current()[0]
        trips, embedded, local = store.round_trips, len(embedder.calls), copying.answered["local"]
        calls = Counted(copying)
        again = [app.answer(calls, *r) for r in REQUESTS]
        assert first == expected and again == expected
        # the second pass: every call from the copy, no round trip and no embedding
        assert store.round_trips == trips and len(embedder.calls) == embedded
        assert calls.made > 2 * 10 and copying.answered["local"] == local + calls.made


class Counted:
    """A collection, counting the calls made on it."""

    def __init__(self, collection) -> None:
        self.collection, self.made = collection, 0

    def __getattr__(self, name: str):
        self.made += 1
        return getattr(self.collection, name)


def test_a_drop_between_two_calls_is_seen_once_notified(changing):
    deployment, chroma = changing
    settings = watched(deployment.settings)
    with ServingCollection(settings, SeededEmbedder()) as collection:
        proven(collection)
        before = collection.query(**holders_call("SOD1"))
        count = collection.count()
        assert collection.count() == count and collection.query(**holders_call("SOD1")) == before
        store = collection._follower.current()[0]
        notified = store.watch.notified
        version = write(settings, [chunk("90001", document="SOD1 holder added", paper_hash="n1")])
        committed = time.monotonic()
        assert store.watch.wait_for(version, timeout=60)
        seen_after = time.monotonic() - committed
        assert store.watch.notified > notified  # learned by the notification, not the heartbeat
        assert collection.count() == count + 1
        after = collection.query(**holders_call("SOD1"))
        assert "90001" in after["ids"][0] and after != before
        with ServingCollection(strict(settings), SeededEmbedder()) as asking:
            assert after == asking.query(**holders_call("SOD1"))
    print(f"a commit was seen by the watch {seen_after * 1000:.2f} ms after the writer returned")


def test_without_notifications_a_commit_is_seen_within_the_staleness_bound(changing):
    """The notify trigger dropped (a table from before it, or notifications lost): after a commit,
    a call made one bound later never answers from the old content, however late the heartbeat.
    The commits are manual DELETEs (the store's own write would add the trigger back)."""
    deployment, _ = changing
    bound_ms = 300
    settings = watched(deployment.settings, staleness_ms=bound_ms)
    table = settings.pg_table
    with (psycopg.connect(settings.pg_dsn, autocommit=True) as conn,
          ServingCollection(settings, SeededEmbedder()) as collection):  # fmt: skip
        conn.execute(f"DROP TRIGGER {table}_change_notify ON {table}_meta")
        proven(collection)
        for _ in range(5):
            count = collection.count()
            assert collection.count() == count  # the copy, before the commit
            conn.execute(f"DELETE FROM {table} WHERE chunk_id = "
                         f"(SELECT chunk_id FROM {table} ORDER BY seq LIMIT 1)")  # fmt: skip
            time.sleep(bound_ms / 1000)
            assert collection.count() == count - 1
        store = collection._follower.current()[0]
        assert store.watch.notified == 0 and collection.answered["local"] >= 5


def test_a_rollback_between_two_calls_moves_the_next_call(changing):
    deployment, _ = changing
    settings = watched(deployment.settings)
    with ServingCollection(settings, SeededEmbedder()) as collection:
        proven(collection)
        collection.query(**holders_call("SOD1"))
        collection.query(**holders_call("SOD1"))
        assert collection.answered["local"] == 1
        promote_directly(settings, PINNED)  # `candlefire rollback` between two calls
        collection.query(**holders_call("SOD1"))
        assert collection.target.backend == "chroma"
        promote_directly(settings)
        collection.query(**holders_call("SOD1"))
        assert collection.target.backend == "pgvector"
        assert collection.answered.get("local", 0) == 0  # a new store: an empty copy


def test_a_lost_watch_makes_every_call_ask_until_it_is_back(changing):
    deployment, _ = changing
    settings = watched(deployment.settings)
    with ServingCollection(settings, SeededEmbedder()) as collection:
        proven(collection)
        store = collection._follower.current()[0]
        count = collection.count()
        lost = store.watch.lost
        with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
            # the watch's connection cut and a write committed while it is down
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = 'candlefire-app-watch'")  # fmt: skip
            write(settings, [chunk("90002", paper_hash="w2")])
        assert collection.count() == count + 1  # from Postgres or from a re-proven copy
        proven(collection)  # back
        assert store.watch.lost > lost
        assert collection.count() == count + 1  # copied again for the content now proven
        local = collection.answered.get("local", 0)
        assert collection.count() == count + 1
        assert collection.answered["local"] == local + 1


CHILD = """
import json, sys
from candlefire_pipeline.app import open_collection
from candlefire_pipeline_tests.app.corpus import SeededEmbedder
collection = open_collection(embedder=SeededEmbedder())
call = {"query_texts": ["SOD1"], "n_results": 10, "where_document": {"$contains": "SOD1"},
        "include": ["metadatas"]}
for line in sys.stdin:
    store = collection._follower.current()[0]
    if line.strip() == "wait":
        store.watch.wait_for(int(sys.stdin.readline()), timeout=60)
    answer = {"count": collection.count(), "ids": collection.query(**call)["ids"][0],
              "local": collection.answered.get("local", 0)}
    print(json.dumps(answer), flush=True)
"""


def test_two_processes_each_see_the_other_writers_commit(changing):
    deployment, _ = changing
    settings = watched(deployment.settings)
    env = {**os.environ, "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
           "CANDLEFIRE_PG_DSN": settings.pg_dsn, "CANDLEFIRE_PG_TABLE": settings.pg_table,
           "CANDLEFIRE_EMBED_MODEL": SeededEmbedder.model_id}  # fmt: skip
    env.pop("CANDLEFIRE_APP_STALENESS_MS", None)
    children = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                for _ in range(2)]  # fmt: skip

    def ask(child, line: str) -> dict:
        child.stdin.write(line)
        child.stdin.flush()
        return json.loads(child.stdout.readline())

    try:
        before = [ask(child, "ask\n") for child in children]
        before = [ask(child, "ask\n") for child in children]  # the second from the copy, or not
        version = write(settings, [chunk("90003", document="SOD1 from another process",
                                         paper_hash="t3")])  # fmt: skip
        after = [ask(child, f"wait\n{version}\n") for child in children]
        again = [ask(child, "ask\n") for child in children]
    finally:
        for child in children:
            child.stdin.close()
            child.wait(timeout=60)
    for b, a, g in zip(before, after, again, strict=True):
        assert a["count"] == b["count"] + 1 and "90003" in a["ids"]
        assert g["count"] == a["count"] and g["ids"] == a["ids"]
        assert g["local"] > a["local"]  # the new content is copied, then served from the copy
