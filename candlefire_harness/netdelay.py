"""A loopback proxy that puts a Postgres "across a network": a delay each way, counted round trips.

    with DelayProxy.for_dsn(pg_dsn, rtt_ms=10) as proxy:
        conn = psycopg.connect(proxy.proxied_dsn(pg_dsn), application_name="app")
        proxy.reset_counts()
        ...
        proxy.round_trips("app")

Every chunk is stamped when the proxy receives it and written rtt/2 later (in order per
direction), so a request and its answer cost at least the RTT; the event loop's timers add a
little (epoll waits whole milliseconds, rounded up). A round trip starts each time the client
sends after the server last sent (or first sends): a connection's setup (SSL probe, startup,
authentication) counts too, so reset the counts after connecting to count only the queries.
Bytes the server pushes unasked (NOTIFY) start none, nor does a client's Terminate (its close).
Connections are tagged with the `application_name` of their StartupMessage (None when it has
none, or the session is encrypted).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter

from candlefire_harness.delayline import Conn, Side
from candlefire_harness.pgwire import Target, dsn_target, proxied_dsn

log = logging.getLogger(__name__)

FAULT_MODES = ("reset", "blackhole")


class DelayProxy:
    """Listens on 127.0.0.1:<port> and forwards each connection to target, delayed.

    target: (host, port) or a Unix socket path. Its event loop runs in a daemon thread; every
    method may be called from any other thread. That thread shares the GIL with the caller's:
    when the caller's threads are busy in Python, hops wait for them and the delay grows; a
    benchmark wants DelayProxyProcess (netdelay_process), the same API in a child process.
    """

    def __init__(self, target: Target, rtt_ms: float = 0.0) -> None:
        self.target = target
        self.set_rtt(rtt_ms)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._conns: set[Conn] = set()
        self._closed_trips: Counter[str | None] = Counter()
        self._fault: str | None = None
        self._blackholed = False  # read for every chunk: a plain attribute
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netdelay", daemon=True)
        self._thread.start()
        try:
            self._server = self._call(self._loop.create_server(self._accept, "127.0.0.1", 0))
        except BaseException:
            self._stop_loop()
            raise
        self.port: int = self._server.sockets[0].getsockname()[1]
        log.debug("delay proxy on 127.0.0.1:%d to %s, rtt %.1f ms", self.port, target, rtt_ms)

    @classmethod
    def for_dsn(cls, dsn: str, rtt_ms: float = 0.0) -> DelayProxy:
        """A proxy to the server a libpq DSN/URI names (one host; a socket directory too)."""
        return cls(dsn_target(dsn), rtt_ms)

    def proxied_dsn(self, dsn: str) -> str:
        """dsn through this proxy: host=127.0.0.1 port=<port>, every other parameter kept."""
        return proxied_dsn(dsn, self.port)

    @property
    def rtt_ms(self) -> float:
        return self._half_rtt * 2000.0

    def set_rtt(self, rtt_ms: float) -> None:
        """The round-trip delay for chunks received from now on (0: none)."""
        if rtt_ms < 0:
            raise ValueError(f"rtt_ms must be >= 0, not {rtt_ms}")
        self._half_rtt = rtt_ms / 2000.0

    def round_trips(self, application_name: str | None = None) -> int:
        """Round trips since the last reset: of every connection (None), or of one tag's."""
        with self._lock:
            counts = Counter(self._closed_trips)
            for conn in self._conns:
                counts[conn.app] += conn.trips
        return sum(counts.values()) if application_name is None else counts[application_name]

    def reset_counts(self) -> None:
        with self._lock:
            self._closed_trips.clear()
            for conn in self._conns:
                conn.trips = 0

    def connections(self) -> dict[str | None, int]:
        """Open proxied connections per application_name (empty when none is open)."""
        with self._lock:
            return dict(Counter(conn.app for conn in self._conns))

    def wait_connections(
        self, count: int = 0, application_name: str | None = None, timeout: float = 10.0
    ) -> bool:
        """Wait until `count` connections are open (of one tag, or all); False on timeout.

        A client's close reaches the proxy asynchronously: wait for it before checking leaks.
        """

        def reached() -> bool:
            apps = [conn.app for conn in self._conns]
            return count == (
                len(apps) if application_name is None else apps.count(application_name)
            )

        with self._changed:
            return self._changed.wait_for(reached, timeout)

    def cut(self, mode: str = "reset") -> None:
        """A fault until restore(). reset: every connection is closed abruptly (a TCP reset to
        the client) and new ones are reset at once. blackhole: nothing is forwarded either way
        and new connections are held unconnected, so clients hang until their own timeouts;
        restore() delivers what waited (a healed partition)."""
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {FAULT_MODES}, not {mode!r}")
        self._call(self._set_fault(mode))

    def restore(self) -> None:
        self._call(self._set_fault(None))

    def close(self) -> None:
        """Stop listening, close every connection, end the loop's thread (idempotent)."""
        if self._loop.is_closed():
            return
        self._call(self._shutdown())
        self._stop_loop()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- the loop's side --------------------------------------------------------------------

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, coro):
        if threading.current_thread() is self._thread:
            raise RuntimeError("DelayProxy methods are for other threads than its loop's")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def _accept(self) -> Side:
        return Side(self, None)

    def _register(self, conn: Conn) -> None:
        with self._changed:
            self._conns.add(conn)
            self._changed.notify_all()

    def _forget(self, conn: Conn) -> None:
        with self._changed:
            self._conns.discard(conn)
            self._closed_trips[conn.app] += conn.trips
            self._changed.notify_all()

    async def _set_fault(self, mode: str | None) -> None:
        self._fault = mode
        self._blackholed = mode == "blackhole"
        for conn in list(self._conns):
            if mode == "reset":
                conn.abort(reset=True)
            else:
                conn.resume()

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [conn.connecting for conn in self._conns if conn.connecting is not None]
        for conn in list(self._conns):
            conn.abort(reset=False)
        await asyncio.gather(*tasks, return_exceptions=True)
