"""A Qdrant server by URL: connect early with a clear error; never show the key or userinfo."""

from __future__ import annotations

from urllib.parse import urlsplit

from qdrant_client import QdrantClient

from candlefire_pipeline.backends.common import BackendUnavailableError


def redact_url(url: str) -> str:
    """scheme://host:port of a server URL: never user, password or query string."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or 'http'}://{parts.hostname or '?'}{port}"


def connect(url: str, api_key: str | None, timeout: int) -> QdrantClient:
    """A client that has answered one request (so a wrong URL or key fails here, clearly)."""
    client = QdrantClient(url=url, api_key=api_key, timeout=timeout)
    try:
        client.get_collections()
    except Exception as exc:  # httpx/grpc/qdrant raise many types
        client.close()
        reason = str(exc).replace(api_key, "***") if api_key else str(exc)
        raise BackendUnavailableError(
            f"cannot use Qdrant at {redact_url(url)}: {type(exc).__name__}: {reason.strip()}"
        ) from None
    return client
