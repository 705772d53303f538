"""The collection while Postgres or the network fails under it: a call during an outage fails in
one line (no password, the server named) after the connect and dead-peer bounds, not a hang; the
first call after Postgres is back is answered without reopening the collection; a DSN naming the
primary and its replica (libpq multi-host) keeps reads going when either is lost."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from candlefire_harness.netdelay import DelayProxy
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.settings import AppClientSettings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder, deploy
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.replicas import caught_up, primary_and_replica

pytestmark = pytest.mark.server

#: short bounds so an outage shows within seconds
CLIENT = AppClientSettings(connect_timeout_s=1, dead_peer_s=2, statement_timeout_ms=2000)
#: a hang guard, not a latency bound: a call that outlives it never came back
HANG_GUARD_S = 120


def holders(word: str) -> dict:
    return {"query_texts": [word], "n_results": 5, "include": ["metadatas", "distances"],
            "where_document": {"$contains": word}}  # fmt: skip


def failing_call(call) -> tuple[BaseException, float]:
    """The error `call()` raised and how long it took (asserting it came back at all)."""
    done: list = []

    def run() -> None:
        started = time.monotonic()
        try:
            call()
        except BaseException as exc:  # the call must fail; anything it raises is the answer
            done.append((exc, time.monotonic() - started))
        else:
            done.append((None, time.monotonic() - started))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    assert done, "the call never came back"
    error, seconds = done[0]
    assert error is not None, "the call was answered during the outage"
    return error, seconds


def one_line(error: BaseException, password: str | None = None) -> str:
    message = str(error)
    assert isinstance(error, BackendUnavailableError), repr(error)
    assert "\n" not in message and message.strip() == message
    if password:
        assert password not in message
    return message


@pytest.fixture
def own_server(tmp_path):
    """A Postgres of this test's own (it is stopped and started) with a small deployment."""
    with pg_data_root() as root:
        server = EmbeddedPostgres(root / "data")
        deployment = deploy(tmp_path, server.dsn, seed=17, papers=30)
        settings = replace(deployment.settings, app_client=CLIENT)
        try:
            yield server, settings
        finally:
            server.stop()


def test_a_restarted_postgres_fails_calls_in_one_line_then_answers_the_next(own_server):
    server, settings = own_server
    with ServingCollection(settings, SeededEmbedder()) as collection:
        count = collection.count()
        before = collection.query(**holders("SOD1"))
        server.stop()
        error, seconds = failing_call(lambda: collection.query(**holders("riluzole")))
        message = one_line(error)
        print(f"during the outage a call failed after {seconds:.2f} s: {message}")
        assert "failed" in message or "cannot connect" in message
        server.dsn  # noqa: B018 - starts it again
        assert collection.count() == count  # the first call after the restart, same collection
        assert collection.query(**holders("SOD1")) == before
        assert collection.target.backend == "pgvector"


@pytest.mark.parametrize("mode", ["reset", "blackhole"])
def test_a_network_cut_fails_calls_within_the_bounds_then_recovers(own_server, mode):
    """reset: the peer's connections are torn down; blackhole: nothing comes back at all (the
    network holds the packets), which only the client's own deadline ends."""
    server, settings = own_server
    with DelayProxy.for_dsn(server.dsn, rtt_ms=2) as proxy:
        across = replace(settings, pg_dsn=proxy.proxied_dsn(server.dsn))
        with ServingCollection(across, SeededEmbedder()) as collection:
            count = collection.count()
            proxy.cut(mode)
            error, seconds = failing_call(lambda: collection.query(**holders("FUS")))
            print(f"{mode}: a call failed after {seconds:.2f} s: {one_line(error)}")
            proxy.restore()
            assert collection.count() == count
            assert collection.query(**holders("FUS"))["ids"][0]


def test_a_multi_host_dsn_reads_on_when_either_server_is_lost(tmp_path):
    with primary_and_replica() as replica:
        primary = replica.primary
        deployment = deploy(tmp_path, primary.dsn, seed=19, papers=30)
        caught_up(replica)
        hosts = f"{primary.data_dir},{replica.data_dir}"
        dsn = f"host={hosts} user=postgres dbname=postgres connect_timeout=2"
        settings = replace(deployment.settings, pg_dsn=dsn, app_client=CLIENT)
        with ServingCollection(settings, SeededEmbedder()) as collection:
            expected = collection.query(**holders("SOD1"))
            count = collection.count()
            primary.stop()  # the first host gone: libpq moves on to the replica
            assert collection.query(**holders("SOD1")) == expected
            assert collection.count() == count
            primary.dsn  # noqa: B018 - back
            replica.stop()  # the replica gone: the primary answers again
            assert collection.query(**holders("ALS")) == collection.query(**holders("ALS"))
            assert collection.count() == count
        with opened_backend("pgvector", replace(deployment.settings, pg_dsn=primary.dsn)) as s:
            s.reset()
