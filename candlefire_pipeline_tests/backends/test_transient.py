"""Which store errors are retried: connection problems yes, data errors never."""

import ssl

import httpx
import psycopg
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.backends.common import BackendUnavailableError, StoreFullError
from candlefire_pipeline.backends.transient import is_transient


def _wrapped(outer: Exception, inner: Exception) -> Exception:
    """outer raised while handling inner, as chromadb raises ValueError around a ConnectError."""
    try:
        try:
            raise inner
        except Exception:
            raise outer  # noqa: B904 - the implicit __context__ is the point
    except Exception as exc:
        return exc


def _http_status(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "https://chroma.internal/api/v2/heartbeat")
    return httpx.HTTPStatusError("status", request=request, response=httpx.Response(code))


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (BackendUnavailableError("cannot open Chroma at 127.0.0.1:9"), True),
        (psycopg.OperationalError("connection refused"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.SerializationFailure("could not serialize"), True),
        (httpx.ConnectError("[Errno 111] Connection refused"), True),
        (httpx.ReadTimeout("timed out"), True),
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError("timed out"), True),
        (
            _wrapped(ValueError("Could not connect to a Chroma server"), httpx.ConnectError("x")),
            True,
        ),
        (DimensionMismatchError("store holds 384-dim vectors of model a, not 768 of b"), False),
        # the Chroma proxy refused the token, or its certificate cannot be verified: not retried
        (_wrapped(BackendUnavailableError("refused (HTTP 401)"), _http_status(401)), False),
        (_wrapped(BackendUnavailableError("refused (HTTP 403)"), _http_status(403)), False),
        (_wrapped(BackendUnavailableError("TLS"), ssl.SSLCertVerificationError("bad cert")), False),
        (_wrapped(BackendUnavailableError("busy (HTTP 503)"), _http_status(503)), True),
        (_wrapped(DimensionMismatchError("dims differ"), psycopg.OperationalError("x")), False),
        # a full disk (disk_full is an OperationalError): the next attempt meets the same disk
        (_wrapped(StoreFullError("the disk is full"), psycopg.errors.DiskFull("x")), False),
        (ValueError("embeddings.parquet is not aligned with chunks.parquet"), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (psycopg.errors.InvalidTextRepresentation("bad input"), False),
        (FileNotFoundError("chunks.parquet"), False),
        (KeyError("embedding"), False),
        (RuntimeError("anything else"), False),
    ],
)
def test_is_transient(exc, transient):
    assert is_transient(exc) is transient
