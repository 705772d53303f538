"""A TLS reverse proxy for tests: forwards to an upstream only requests with the bearer token.

What docs/DEPLOY.md puts in front of `chroma run` (nginx / Caddy there), small enough to read:
TLS with the given certificate, `Authorization: Bearer <token>` compared in constant time, 401
otherwise; the Authorization header is not forwarded and never logged. The token comes from the
environment (TOKEN_PROXY_TOKEN), never from the command line, which any local user can read.

python -m candlefire_pipeline_tests.reliability.token_proxy --port P --upstream-port U \\
    --cert cert.pem --key key.pem
"""

from __future__ import annotations

import argparse
import hmac
import http.client
import os
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Headers that belong to one connection and are not forwarded either way.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade",
}  # fmt: skip
UNAUTHORIZED = b'{"error": "Unauthorized", "message": "missing or wrong bearer token"}'


class TokenProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TokenProxy

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        expected = f"Bearer {self.server.token}".encode()
        given = (self.headers.get("Authorization") or "").encode()
        if not hmac.compare_digest(given, expected):
            self._reply(401, UNAUTHORIZED, [("Content-Type", "application/json"),
                                            ("WWW-Authenticate", "Bearer")])  # fmt: skip
            return
        skip = HOP_BY_HOP | {"authorization", "host", "content-length"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=300)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in skip]
            self._reply(response.status, data, kept)
        except OSError:
            self._reply(502, b'{"error": "Bad Gateway"}', [("Content-Type", "application/json")])
        finally:
            upstream.close()

    def _reply(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

    def log_message(self, format: str, *args) -> None:  # the stdlib's name
        # the request line and status only: headers (the token) are never written
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


class TokenProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream_port: int, token: str, context: ssl.SSLContext):
        super().__init__(("127.0.0.1", port), TokenProxyHandler)
        self.upstream_port, self.token = upstream_port, token
        self.socket = context.wrap_socket(self.socket, server_side=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    token = os.environ.get("TOKEN_PROXY_TOKEN", "")
    if not token:
        sys.exit("TOKEN_PROXY_TOKEN is not set")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    TokenProxy(args.port, args.upstream_port, token, context).serve_forever()


if __name__ == "__main__":
    main()
