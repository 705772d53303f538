"""candle-fire's search path across a network: open_collection() with its process copy on (the
default), ServingReader, and open_collection() with the copy off (CANDLEFIRE_APP_STALENESS_MS=0:
every call asks Postgres, the per-call path of issue 52), each behind a loopback delay proxy of
its own (candlefire_harness.netdelay_process: a child process, so the app's threads cannot slow
its packets), at each round-trip time; at 0 ms the real Chroma collection's same calls beside.

The arms are warmed once at 0 ms as the app benchmark defines it (an untimed pass over the name
pool and one over the requests). At each RTT the arms then answer, interleaved request by request
in a rotating order, requests whose question texts none of them has seen (unseen.py: the names
and codes were seen), then the warm pass's own requests again word for word ("repeated": the
copy answers them whole; Chroma is left out of that row). Each arm's round trips are counted by
its proxy on the wire, per request: the collection's connections by their application_name, so
its change watch's heartbeats (their own application_name) are counted apart, as a rate.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import psycopg

from benchmarks.app.counting import CountingCalls, CountingEmbedder, open_chroma_collection
from benchmarks.app.side_by_side import Arm, rotated, search_answer
from benchmarks.common.requests import Request
from candlefire_harness.netdelay_process import DelayProxyProcess
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.app.pg_lanes import APP_NAME
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.settings import AppClientSettings, Settings

log = logging.getLogger(__name__)

COPY_ON, READER = "open_collection()", "ServingReader"
COPY_OFF, CHROMA = "open_collection(), copy off", "Chroma collection"
ARMS = (COPY_ON, READER, COPY_OFF, CHROMA)
WATCH_NAME = f"{APP_NAME}-watch"
PROBE_NAME = "bench-rtt-probe"
NEW, REPEATED = "new question texts", "repeated requests"
#: Untimed requests on Chroma first: its connection and the load of its index.
CHROMA_WARMUP = 3


@dataclass
class NetArm:
    """One way of answering a request, the proxy in front of its Postgres and the
    application_name its round trips are counted by (None: every connection of the proxy)."""

    name: str
    answer: Callable[[Request], object]
    embedder: CountingEmbedder
    calls: CountingCalls | None = None
    proxy: DelayProxyProcess | None = None
    tag: str | None = None
    collection: object | None = None  # the ServingCollection, for its store's figures

    def trips(self) -> int:
        return 0 if self.proxy is None else self.proxy.round_trips(self.tag)


@dataclass
class Row:
    """The arms' requests at one RTT, new texts or repeated."""

    rtt: float  # the delay asked of the proxies, ms
    kind: str
    measured_rtt: float = 0.0  # median SELECT 1 through the proxies, ms
    arms: dict[str, Arm] = field(default_factory=dict)
    trips: dict[str, list[int]] = field(default_factory=dict)
    #: the change watch's round trips per second (its heartbeats), while the row ran
    heartbeats: float = 0.0


@dataclass
class Across:
    """The arms, their proxies and a probe connection through each proxy."""

    arms: dict[str, NetArm]
    proxies: dict[str, DelayProxyProcess]
    probes: dict[str, psycopg.Connection]
    dsn: str
    settings: dict[str, Settings]

    def set_rtt(self, rtt: float) -> None:
        for proxy in self.proxies.values():
            proxy.set_rtt(rtt)

    def measured_rtt(self, samples: int = 21) -> float:
        """Median milliseconds of SELECT 1 through the proxies (each probe in turn)."""
        seconds = []
        for _ in range(samples):
            for probe in self.probes.values():
                started = time.perf_counter()
                probe.execute("SELECT 1", prepare=False).fetchone()
                seconds.append(time.perf_counter() - started)
        return statistics.median(seconds) * 1e3


def store_of(collection):
    """The collection's pgvector store (PgCollectionStore) as it serves now."""
    return collection._follower.current()[0]


@contextmanager
def across(settings: Settings, embedder, dsn: str,
           chroma: tuple[Path, str] | None) -> Iterator[Across]:  # fmt: skip
    """The arms, each behind its own proxy at 0 ms (Chroma, when given, local)."""
    with ExitStack() as stack:
        proxies, probes, made = {}, {}, {}
        for name in (COPY_ON, READER, COPY_OFF):
            proxy = stack.enter_context(DelayProxyProcess.for_dsn(dsn, 0.0))
            proxies[name] = proxy
            probes[name] = stack.enter_context(
                psycopg.connect(
                    proxy.proxied_dsn(dsn), application_name=PROBE_NAME, autocommit=True
                )
            )
        made[COPY_ON] = replace(settings, pg_dsn=proxies[COPY_ON].proxied_dsn(dsn))
        made[READER] = replace(settings, pg_dsn=proxies[READER].proxied_dsn(dsn))
        made[COPY_OFF] = replace(settings, pg_dsn=proxies[COPY_OFF].proxied_dsn(dsn),
                                 app_client=AppClientSettings(staleness_ms=0))  # fmt: skip
        arms = {}
        for name in (COPY_ON, COPY_OFF):
            counting = CountingEmbedder(embedder)
            collection = stack.enter_context(open_collection(made[name], counting))
            calls = CountingCalls(collection)
            arms[name] = NetArm(name, search_answer(calls), counting, calls, proxies[name],
                                APP_NAME, collection)  # fmt: skip
        counting = CountingEmbedder(embedder)
        reader = ServingReader(made[READER], counting)
        stack.callback(reader.close)
        arms[READER] = NetArm(READER, lambda r: reader.retrieve(r.query, r.entities, r.terms),
                              counting, proxy=proxies[READER])  # fmt: skip
        if chroma is not None:
            counting = CountingEmbedder(embedder)
            client, chroma_collection = open_chroma_collection(*chroma, counting)
            stack.callback(client.close)
            calls = CountingCalls(chroma_collection)
            arms[CHROMA] = NetArm(CHROMA, search_answer(calls), counting, calls)
        yield Across({n: arms[n] for n in ARMS if n in arms}, proxies, probes, dsn, made)


def warm(net: Across, warm_pass: list[Request]) -> None:
    """The app that has run a while, at 0 ms: every arm but Chroma over the warm pass; Chroma
    its connection and index load."""
    net.set_rtt(0.0)
    if CHROMA in net.arms:
        for request in warm_pass[:CHROMA_WARMUP]:
            net.arms[CHROMA].answer(request)
    for request in warm_pass:
        for name in (COPY_ON, READER, COPY_OFF):
            net.arms[name].answer(request)
    for name in (COPY_ON, COPY_OFF):
        served = net.arms[name].collection.target
        if served is None or served.backend != "pgvector":
            raise RuntimeError(f"{name} read {served}, not pgvector")


def measure_row(net: Across, rtt: float, kind: str, requests: list[Request]) -> Row:
    """Every request on each arm (Chroma: new texts at 0 ms only), interleaved, at `rtt`."""
    net.set_rtt(rtt)
    row = Row(rtt, kind, measured_rtt=net.measured_rtt())
    names = [n for n in net.arms if n != CHROMA or (rtt == 0 and kind == NEW)]
    for name in names:
        arm = net.arms[name]
        row.arms[name] = Arm(name, arm.answer, arm.embedder, arm.calls)
        row.trips[name] = []
    watch = net.proxies[COPY_ON]
    beats, started = watch.round_trips(WATCH_NAME), time.perf_counter()
    for i, request in enumerate(requests):
        for name in rotated(tuple(names), i):
            before = net.arms[name].trips()
            row.arms[name].timed(request)
            row.trips[name].append(net.arms[name].trips() - before)
        log.info("%g ms, %s, request %d of %d: %s", rtt, kind, i + 1, len(requests),
                 ", ".join(f"{n} {row.arms[n].seconds[-1] * 1e3:.0f} ms"
                           f" {row.trips[n][-1]} trips" for n in names))  # fmt: skip
    elapsed = time.perf_counter() - started
    row.heartbeats = (watch.round_trips(WATCH_NAME) - beats) / elapsed
    return row
