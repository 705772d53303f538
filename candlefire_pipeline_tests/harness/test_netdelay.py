"""The delay proxy on the real embedded Postgres: counted round trips, delay, tags, faults.

Counts include a connection's setup (probe, startup); the tests reset them after connecting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from candlefire_harness.netdelay import DelayProxy
from candlefire_harness.netdelay_process import DelayProxyProcess

pytestmark = pytest.mark.server


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[DelayProxy]:
    with DelayProxy.for_dsn(pg_dsn) as made:
        yield made


@pytest.fixture
def connect(proxy: DelayProxy, pg_dsn: str) -> Iterator:
    """Opens autocommit connections through the proxy, tagged; closes the ones left open.

    psycopg prepares a query at its 5th execution, which costs one more round trip (a Parse
    alone): off here, so that one statement is one round trip.
    """
    opened: list[psycopg.Connection] = []

    def open_one(app: str, **kwargs) -> psycopg.Connection:
        kwargs.setdefault("prepare_threshold", None)
        conn = psycopg.connect(
            proxy.proxied_dsn(pg_dsn), application_name=app, autocommit=True, **kwargs
        )
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        conn.close()


def test_each_autocommit_statement_is_one_round_trip(proxy, connect):
    conn = connect("sequential")
    assert proxy.round_trips("sequential") >= 1  # the setup counts: probe, startup
    proxy.reset_counts()
    for _ in range(25):
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert proxy.round_trips("sequential") == 25
    assert proxy.round_trips() == 25
    assert proxy.round_trips("another") == 0


def test_a_pipeline_is_one_round_trip(proxy, connect):
    conn = connect("pipelined")
    proxy.reset_counts()
    with conn.pipeline():
        first = conn.execute("SELECT 1")
        second = conn.execute("SELECT 2")
    assert (first.fetchone(), second.fetchone()) == ((1,), (2,))
    assert proxy.round_trips("pipelined") == 1


def test_a_notify_the_server_pushes_is_no_round_trip(proxy, connect, pg_dsn):
    listener = connect("listener")
    listener.execute("LISTEN netdelay_test")
    proxy.reset_counts()
    with psycopg.connect(pg_dsn, autocommit=True) as notifier:  # not through the proxy
        notifier.execute("NOTIFY netdelay_test, 'hello'")
    received = list(listener.notifies(timeout=10, stop_after=1))
    assert [n.payload for n in received] == ["hello"]
    assert proxy.round_trips("listener") == 0
    listener.execute("SELECT 1")
    assert proxy.round_trips("listener") == 1


def test_a_round_trip_takes_at_least_the_rtt(proxy, connect):
    conn = connect("delayed")
    proxy.set_rtt(20)
    assert proxy.rtt_ms == 20
    took = []
    for _ in range(5):
        start = time.perf_counter()
        conn.execute("SELECT 1")
        took.append(time.perf_counter() - start)
    assert min(took) >= 0.020
    with pytest.raises(ValueError):
        proxy.set_rtt(-1)


def test_a_delay_set_at_construction(pg_dsn):
    with DelayProxy.for_dsn(pg_dsn, rtt_ms=20) as proxy:
        with psycopg.connect(proxy.proxied_dsn(pg_dsn), autocommit=True) as conn:
            start = time.perf_counter()
            conn.execute("SELECT 1")
            assert time.perf_counter() - start >= 0.020
        assert proxy.connections() in ({}, {None: 1})  # untagged; its close may still be on the way
        assert proxy.wait_connections(0)


def test_connections_are_tagged_and_counted_per_thread(proxy, connect):
    proxy.set_rtt(2)
    conns = {f"worker-{i}": connect(f"worker-{i}") for i in range(8)}
    assert proxy.connections() == dict.fromkeys(conns, 1)
    proxy.reset_counts()

    def work(app: str) -> None:
        for _ in range(20):
            assert conns[app].execute("SELECT %s::int", [7]).fetchone() == (7,)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, conns))
    assert {app: proxy.round_trips(app) for app in conns} == dict.fromkeys(conns, 20)
    assert proxy.round_trips() == 160
    for conn in conns.values():
        conn.close()
    assert proxy.wait_connections(0)
    assert proxy.connections() == {}
    assert proxy.round_trips() == 160  # closed connections keep their counts until a reset


def test_a_reset_cut_fails_the_next_call_and_restore_heals(proxy, connect):
    conn = connect("cut")
    conn.execute("SELECT 1")
    proxy.cut()
    assert proxy.connections() == {}
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        connect("refused", connect_timeout=5)
    proxy.restore()
    assert connect("healed").execute("SELECT 1").fetchone() == (1,)


def test_a_reset_cut_fails_a_call_in_flight(proxy, connect):
    conn = connect("in-flight")
    failed = []

    def sleep_on_the_server() -> None:
        try:
            conn.execute("SELECT pg_sleep(30)")
        except psycopg.OperationalError as exc:
            failed.append(exc)

    caller = threading.Thread(target=sleep_on_the_server)
    caller.start()
    _wait_for(lambda: proxy.round_trips("in-flight") >= 3)  # setup, then the sleep sent
    proxy.cut(mode="reset")
    caller.join(timeout=20)
    assert failed and not caller.is_alive()


def test_a_blackhole_holds_calls_until_restore(proxy, connect):
    conn = connect("held")
    proxy.cut(mode="blackhole")
    answers = []
    caller = threading.Thread(target=lambda: answers.append(conn.execute("SELECT 3").fetchone()))
    caller.start()
    caller.join(timeout=0.3)
    assert caller.is_alive() and not answers  # hangs: nothing comes back
    assert proxy.connections() == {"held": 1}
    proxy.restore()
    caller.join(timeout=20)
    assert answers == [(3,)]
    with pytest.raises(ValueError):
        proxy.cut(mode="flaky")


def _wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_the_proxy_in_a_child_process(pg_dsn):
    with DelayProxyProcess.for_dsn(pg_dsn, rtt_ms=20) as proxy:
        dsn = proxy.proxied_dsn(pg_dsn)
        with psycopg.connect(dsn, application_name="child", autocommit=True) as conn:
            proxy.reset_counts()
            start = time.perf_counter()
            conn.execute("SELECT 1")
            assert time.perf_counter() - start >= 0.020
            proxy.set_rtt(0)
            assert proxy.rtt_ms == 0
            conn.execute("SELECT 1")
            assert proxy.round_trips("child") == 2
            assert proxy.connections() == {"child": 1}
            with pytest.raises(ValueError):
                proxy.cut(mode="flaky")  # raised in the child, raised here
            proxy.cut()
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        proxy.restore()
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert proxy.wait_connections(0)
    with pytest.raises(RuntimeError):
        proxy.round_trips()  # closed
