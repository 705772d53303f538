"""The proxy's insides, on its event loop: a connection's two sockets and a delay line each way.

`proxy` is the DelayProxy (netdelay) owning them: its _lock, _changed, _half_rtt, _fault,
_blackholed, _loop, target, _register and _forget are what they use.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections import deque
from typing import TYPE_CHECKING

from candlefire_harness.pgwire import StartupParser

if TYPE_CHECKING:
    from candlefire_harness.netdelay import DelayProxy

log = logging.getLogger("candlefire_harness.netdelay")

#: Bytes delayed in one direction before the proxy stops reading their sender (backpressure).
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18
#: SO_LINGER on with 0 s: closing the socket sends a TCP reset instead of a FIN.
_RESET = struct.pack("ii", 1, 0)
#: The client's Terminate message, all a closing client sends.
TERMINATE = b"X\x00\x00\x00\x04"


class Side(asyncio.Protocol):
    """One socket of a proxied connection: the client's (conn None until made) or the server's."""

    def __init__(self, proxy: DelayProxy, conn: Conn | None) -> None:
        self.proxy = proxy
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.blocked = False  # its write buffer is full: stop reading what is written to it
        self.gone = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.conn is not None:
            self.conn.attach_server(self)
        elif self.proxy._fault == "reset":
            abort_transport(transport, reset=True)
        else:
            self.conn = Conn(self.proxy, self)

    def data_received(self, data: bytes) -> None:
        self.conn.received(self, data)

    def eof_received(self) -> bool:
        self.conn.ended(self)
        return True  # the connection closes both sockets once the other way is flushed

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        if self.conn is not None:
            self.conn.lost(self)

    def pause_writing(self) -> None:
        self.blocked = True
        self.conn.update_reading()

    def resume_writing(self) -> None:
        self.blocked = False
        self.conn.update_reading()


class Line:
    """One direction: chunks stamped on receipt, each written at its stamp + rtt/2, in order."""

    def __init__(self, conn: Conn, source: Side | None, dest: Side | None) -> None:
        self.conn = conn
        self.source = source
        self.dest = dest
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.full = False
        self.ending = False

    def ready(self) -> bool:
        return self.dest is not None and not self.conn.proxy._blackholed

    def push(self, data: bytes) -> None:
        delay = self.conn.proxy._half_rtt
        if delay <= 0 and not self.queue and self.ready():  # rtt 0: no queue, no timer
            if not self.dest.transport.is_closing():
                self.dest.transport.write(data)
            return
        self.queue.append((self.conn.loop.time() + delay, data))
        self.queued += len(data)
        if self.queued > HIGH_WATER and not self.full:
            self.full = True
            self.conn.update_reading()
        self.schedule()

    def schedule(self) -> None:
        if self.timer is None and self.queue and self.ready():
            self.timer = self.conn.loop.call_at(self.queue[0][0], self.flush)

    def flush(self) -> None:
        self.timer = None
        if not self.ready():
            return
        now = self.conn.loop.time()
        transport = self.dest.transport
        while self.queue and self.queue[0][0] <= now:
            data = self.queue.popleft()[1]
            self.queued -= len(data)
            if not transport.is_closing():
                transport.write(data)
        if self.full and self.queued < LOW_WATER:
            self.full = False
            self.conn.update_reading()
        if self.queue:
            self.schedule()
        elif self.ending:
            self.conn.close()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class Conn:
    """A proxied connection: the client's socket, the server's, and a delay line each way."""

    def __init__(self, proxy: DelayProxy, client: Side) -> None:
        self.proxy = proxy
        self.loop = proxy._loop
        self.client = client
        self.server: Side | None = None
        self.app: str | None = None
        self.trips = 0
        self.client_spoke_last = False
        self.parser = StartupParser()
        self.up = Line(self, client, None)
        self.down = Line(self, None, client)
        self.connecting: asyncio.Task | None = None
        self.done = False
        proxy._register(self)
        self.resume()

    def resume(self) -> None:
        """(Re)start forwarding unless black-holed: connect upstream, read, flush what waited."""
        if not self.proxy._blackholed and self.server is None and self.connecting is None:
            self.connecting = self.loop.create_task(self._connect())
        self.update_reading()
        self.up.schedule()
        self.down.schedule()

    async def _connect(self) -> None:
        target = self.proxy.target
        factory = lambda: Side(self.proxy, self)  # noqa: E731
        try:
            if isinstance(target, str):
                await self.loop.create_unix_connection(factory, target)
            else:
                await self.loop.create_connection(factory, *target)
        except OSError as exc:
            log.warning("delay proxy: cannot reach %s (%s)", target, exc)
            self.connecting = None
            self.abort(reset=True)
        self.connecting = None

    def attach_server(self, side: Side) -> None:
        if self.done:
            abort_transport(side.transport, reset=False)
            return
        self.server = self.up.dest = self.down.source = side
        self.resume()

    def received(self, side: Side, data: bytes) -> None:
        if side is self.client:
            if not self.client_spoke_last:
                self.client_spoke_last = True
                if data != TERMINATE:  # a goodbye is answered by nothing: no round trip
                    with self.proxy._lock:
                        self.trips += 1
            if not self.parser.done and self.parser.feed_client(data):
                with self.proxy._changed:
                    self.app = self.parser.application_name
                    self.proxy._changed.notify_all()
            self.up.push(data)
        else:
            self.client_spoke_last = False
            if not self.parser.done:
                self.parser.feed_server(data)
            self.down.push(data)

    def update_reading(self) -> None:
        """Read a side only when not black-holed and what it sends can be delivered."""
        for line in (self.up, self.down):
            transport = line.source.transport if line.source is not None else None
            if transport is None or transport.is_closing():
                continue
            blocked = line.full or (line.dest is not None and line.dest.blocked)
            want = not self.proxy._blackholed and not blocked
            if want and not transport.is_reading():
                transport.resume_reading()
            elif not want and transport.is_reading():
                transport.pause_reading()

    def ended(self, side: Side) -> None:
        """A side closed: deliver what it sent that is still delayed, then close both."""
        line = self.up if side is self.client else self.down
        line.ending = True
        if not line.queue or not line.ready():
            self.close()

    def lost(self, side: Side) -> None:
        self.ended(side)
        if self.client.gone and (self.server is None or self.server.gone):
            self._finish()

    def close(self) -> None:
        for side in (self.client, self.server):
            if side is not None and not side.transport.is_closing():
                side.transport.close()

    def abort(self, reset: bool) -> None:
        for side in (self.client, self.server):
            if side is not None:
                abort_transport(side.transport, reset)
        self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.up.stop()
        self.down.stop()
        if self.connecting is not None:
            self.connecting.cancel()
        self.proxy._forget(self)


def abort_transport(transport: asyncio.Transport, reset: bool) -> None:
    """Close at once, dropping what is buffered; with reset, a TCP peer gets an RST."""
    sock = transport.get_extra_info("socket")
    if reset and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    transport.abort()
