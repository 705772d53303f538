"""Opens a chromadb client: a local folder, or a server, optionally over HTTPS with a token.

`chroma run` has no authentication of its own; the documented deployment puts a reverse proxy
in front of it that terminates TLS and requires `Authorization: Bearer <token>`. The token is a
secret: it is sent only in that header, only over HTTPS (or to a loopback address), and no
message built here quotes it.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import chromadb
import httpx
from chromadb.config import Settings as ChromaSettings

from candlefire_pipeline.backends.common import BackendUnavailableError

LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class ChromaServerAccess:
    """Where a Chroma server is and how to reach it."""

    host: str
    port: int = 8000
    token: str | None = field(default=None, repr=False)
    ssl: bool = False
    ca_bundle: Path | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"

    def check(self) -> None:
        """ValueError for a configuration that would leak the token or cannot verify TLS."""
        if self.token and not self.ssl and not _is_loopback(self.host):
            raise ValueError(
                f"refusing to send the Chroma token (CANDLEFIRE_CHROMA_TOKEN) in clear text to "
                f"{self.host}: set CANDLEFIRE_CHROMA_SSL=true (TLS at the proxy)"
            )
        if self.ca_bundle is not None and not self.ssl:
            raise ValueError("CANDLEFIRE_CHROMA_CA_BUNDLE is set but CANDLEFIRE_CHROMA_SSL is not")
        if self.ca_bundle is not None and not Path(self.ca_bundle).is_file():
            raise ValueError(f"CANDLEFIRE_CHROMA_CA_BUNDLE {self.ca_bundle} is not a file")


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_client(path: Path | None, server: ChromaServerAccess | None):
    """A PersistentClient at `path`, or an HttpClient for `server` (exactly one is given)."""
    settings = ChromaSettings(anonymized_telemetry=False)
    if server is None:
        Path(path).mkdir(parents=True, exist_ok=True)
        try:
            return chromadb.PersistentClient(path=str(path), settings=settings)
        except Exception as exc:  # chroma raises many types for "cannot open"
            raise BackendUnavailableError(f"cannot open Chroma at {path}: {exc}") from None
    server.check()
    if server.ca_bundle is not None:
        settings = ChromaSettings(
            anonymized_telemetry=False, chroma_server_ssl_verify=str(server.ca_bundle)
        )
    headers = {"Authorization": f"Bearer {server.token}"} if server.token else None
    try:
        return chromadb.HttpClient(
            host=server.host, port=server.port, ssl=server.ssl, headers=headers, settings=settings
        )
    except Exception as exc:  # chroma raises many types for "unreachable"
        raise BackendUnavailableError(_explain(exc, server)) from None


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _explain(exc: Exception, server: ChromaServerAccess) -> str:
    """Why the server could not be used, in words an operator can act on (no token quoted)."""
    for link in _chain(exc):
        if isinstance(link, httpx.HTTPStatusError) and link.response.status_code in (401, 403):
            code = link.response.status_code
            why = (
                "the configured token was not accepted"
                if server.token
                else "no token is configured (CANDLEFIRE_CHROMA_TOKEN)"
            )
            return f"Chroma at {server.url} refused the request (HTTP {code}): {why}"
        if isinstance(link, ssl.SSLCertVerificationError):
            return (
                f"the TLS certificate of Chroma at {server.url} could not be verified "
                f"({link.verify_message}); set CANDLEFIRE_CHROMA_CA_BUNDLE to the CA that signed it"
            )
        if isinstance(link, ssl.SSLError):
            return f"TLS with Chroma at {server.url} failed ({link.reason}); is it serving HTTPS?"
    return f"cannot open Chroma at {server.url}: {exc}"
