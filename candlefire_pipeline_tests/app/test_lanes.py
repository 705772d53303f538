"""The collection's connections (app/pg_lanes.py): app threads sharing one collection each take a
connection of their own for a call (no thread waits on another's round trip), no more than
CANDLEFIRE_PG_POOL_SIZE are ever open, none is left after close, and a call that finds every
connection busy past the pool timeout fails by name."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from candlefire_harness.netdelay import DelayProxy
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.app.pg_lanes import APP_NAME, Lanes, PoolExhaustedError
from candlefire_pipeline.settings import AppClientSettings
from candlefire_pipeline_tests.app.corpus import WORDS, SeededEmbedder

pytestmark = pytest.mark.server


def across(settings, proxy, **client):
    return replace(settings, pg_dsn=proxy.proxied_dsn(settings.pg_dsn),
                   app_client=AppClientSettings(**client))  # fmt: skip


def holders(word: str, n: int = 5) -> dict:
    return {"query_texts": [word], "n_results": n, "include": ["metadatas", "distances"],
            "where_document": {"$contains": word}}  # fmt: skip


@pytest.fixture
def busiest(monkeypatch):
    """The most lanes busy at once, seen whenever a call takes one."""
    seen = {"max": 0}
    take = Lanes._take

    def counted(self):
        lane = take(self)
        seen["max"] = max(seen["max"], self.busy)
        return lane

    monkeypatch.setattr(Lanes, "_take", counted)
    return seen


def test_threads_share_a_bounded_set_of_connections_and_none_is_left(app_deployment, busiest):
    threads, pool = 8, 4
    with DelayProxy.for_dsn(app_deployment.settings.pg_dsn, rtt_ms=20) as proxy:
        settings = across(app_deployment.settings, proxy, pool_size=pool, staleness_ms=0)
        with ServingCollection(settings, SeededEmbedder()) as collection:
            errors: list[BaseException] = []

            def work(i: int) -> None:
                try:
                    for word in WORDS[i::threads][:4]:
                        assert collection.query(**holders(word))["ids"]
                except BaseException as exc:  # reported below
                    errors.append(exc)

            workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            assert errors == []
            store = collection._follower.current()[0]
            assert store.lanes.opened <= pool
            assert proxy.connections().get(APP_NAME, 0) <= pool
            # calls overlapped: threads did not wait on each other's round trips
            assert busiest["max"] >= 2
        assert proxy.wait_connections(0, application_name=APP_NAME)
        assert proxy.wait_connections(0, application_name=f"{APP_NAME}-watch")


def test_every_connection_busy_past_the_pool_timeout_fails_by_name(app_deployment):
    settings = replace(app_deployment.settings,
                       app_client=AppClientSettings(pool_size=1, pool_timeout_s=0.2))  # fmt: skip
    with ServingCollection(settings, SeededEmbedder()) as collection:
        store = collection._follower.current()[0]
        with store.lanes.lane():  # the only connection, held by another caller
            with pytest.raises(PoolExhaustedError, match="CANDLEFIRE_PG_POOL_SIZE"):
                collection.query(**holders("never asked before"))
        assert collection.query(**holders("SOD1"))["ids"]  # free again
