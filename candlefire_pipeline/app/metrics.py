"""What an operator sees of the app's collection: prometheus_client metrics, off by default.

With CANDLEFIRE_APP_METRICS=prometheus every call is counted by kind, by how it was answered
("local" the process copy, "kept" a term cache entry, "kept after computing", "sql", "chroma")
and by the store and generation served, with its latency and round trips; errors by type; and a
request (the calls the app makes inside `with collection.request():`) by its latency, calls and
round trips. Gauges: what serves, the content version the process copy answers for, whether the
change watch proves it now, the copy's size and the connections open and busy. They land in
prometheus_client's default registry (the app's own /metrics exposes them) or, with
CANDLEFIRE_APP_METRICS_PORT, on a port of their own. prometheus_client is imported only then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TRIPS = (0, 1, 2, 3, 4, 6, 10, 20, 50, 100)
CALLS = (1, 5, 10, 20, 40, 80, 160)


class CollectionMetrics:
    """The process's metric families (prometheus forbids registering a name twice: one owner,
    `process_metrics()`), updated by every collection of the process."""

    def __init__(self, registry=None) -> None:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        made = {"registry": registry or REGISTRY}
        self.calls = Counter("candlefire_app_calls", "Collection calls, by how they were answered",
                             ["call", "answered", "store", "generation"], **made)  # fmt: skip
        self.call_seconds = Histogram("candlefire_app_call_seconds", "Latency of one call",
                                      ["call", "store"], buckets=SECONDS, **made)  # fmt: skip
        self.call_trips = Histogram("candlefire_app_call_round_trips",
                                    "Round trips to Postgres of one call", ["call"],
                                    buckets=TRIPS, **made)  # fmt: skip
        self.errors = Counter("candlefire_app_errors", "Calls that raised, by error type",
                              ["call", "error"], **made)  # fmt: skip
        self.requests = Counter("candlefire_app_requests", "Requests (collection.request())",
                                **made)  # fmt: skip
        self.request_seconds = Histogram("candlefire_app_request_seconds", "Latency of a request",
                                         buckets=SECONDS, **made)  # fmt: skip
        self.request_trips = Histogram("candlefire_app_request_round_trips",
                                       "Sequential round trips of a request", buckets=TRIPS,
                                       **made)  # fmt: skip
        self.request_calls = Histogram("candlefire_app_request_calls", "Calls of a request",
                                       buckets=CALLS, **made)  # fmt: skip
        self.serving = Gauge("candlefire_app_serving", "1 for the store and generation served",
                             ["store", "generation"], **made)  # fmt: skip
        self.version = Gauge("candlefire_app_content_version",
                             "Content version the process copy answers for", **made)  # fmt: skip
        self.proven = Gauge("candlefire_app_watch_proven",
                            "1 while the change watch proves the content (the copy answers)",
                            **made)  # fmt: skip
        self.local_bytes = Gauge(
            "candlefire_app_local_answers_bytes",
            "Estimated bytes of the process copy of answers",
            **made,
        )
        self.connections = Gauge("candlefire_app_connections", "Connections to Postgres",
                                 ["state"], **made)  # fmt: skip


_OWNED: dict[str, CollectionMetrics] = {}
_OWNING = threading.Lock()


def process_metrics(port: int = 0) -> CollectionMetrics:
    """The process's metrics in the default registry (made once; with a port, served there)."""
    with _OWNING:
        if "default" not in _OWNED:
            _OWNED["default"] = CollectionMetrics()
            if port:
                from prometheus_client import start_http_server

                start_http_server(port)
                log.info("collection metrics served on port %d", port)
        return _OWNED["default"]


class Request:
    """One request's calls, round trips and latency (a thread's `with collection.request()`)."""

    def __init__(self) -> None:
        self.calls = self.round_trips = 0
        self.started = time.perf_counter()


class CallMeter:
    """A collection's side: times each call and reports it (a no-op when metrics are off)."""

    def __init__(self, metrics: CollectionMetrics | None) -> None:
        self.metrics = metrics
        self._request = threading.local()
        self._served = None  # the target the serving gauge names

    @contextmanager
    def request(self) -> Iterator[Request]:
        """The calls made inside, on this thread, are one request."""
        request = Request()
        self._request.current = request
        try:
            yield request
        finally:
            self._request.current = None
            if self.metrics is not None:
                m = self.metrics
                m.requests.inc()
                m.request_seconds.observe(time.perf_counter() - request.started)
                m.request_trips.observe(request.round_trips)
                m.request_calls.observe(request.calls)

    @contextmanager
    def call(self, name: str, served, target) -> Iterator[None]:
        """Time one call on `served` (a store: its `last` says how it answered) for `target`."""
        started = time.perf_counter()
        try:
            yield
        except Exception as exc:
            self.failed(name, exc)
            raise
        trips = getattr(getattr(served, "last", None), "round_trips", 0) or 0
        request = getattr(self._request, "current", None)
        if request is not None:
            request.calls += 1
            request.round_trips += trips
        if self.metrics is not None:
            self._observe(name, served, target, time.perf_counter() - started, trips)

    def failed(self, name: str, exc: Exception) -> None:
        if self.metrics is not None:
            self.metrics.errors.labels(name, type(exc).__name__).inc()

    def _observe(self, name: str, served, target, seconds: float, trips: int) -> None:
        m, store = self.metrics, served.name
        how = getattr(getattr(served, "last", None), "how", None) or store
        if target != self._served:
            if self._served is not None:
                m.serving.labels(self._served.backend, self._served.generation).set(0)
            m.serving.labels(target.backend, target.generation).set(1)
            self._served = target
        m.calls.labels(name, how, store, target.generation).inc()
        m.call_seconds.labels(name, store).observe(seconds)
        m.call_trips.labels(name).observe(trips)
        watch = getattr(served, "watch", None)
        if watch is not None:
            epoch = watch.current()
            m.proven.set(0 if epoch is None else 1)
            if epoch is not None:
                m.version.set(epoch.version)
        local = getattr(served, "local", None)
        if local is not None:
            m.local_bytes.set(local.bytes)
        lanes = getattr(served, "lanes", None)
        if lanes is not None:
            m.connections.labels("open").set(lanes.opened)
            m.connections.labels("busy").set(lanes.busy)
