"""Which store errors are worth a retry: a connection that failed, not data that is wrong."""

from __future__ import annotations

import ssl

import httpx
import psycopg

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.backends.common import BackendUnavailableError, StoreFullError

#: Raised when a server cannot be reached, went away mid-call, or asked the client to retry.
TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    BackendUnavailableError,
    ConnectionError,
    TimeoutError,
    psycopg.OperationalError,  # connection refused / lost, admin shutdown, cannot connect now
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    httpx.TransportError,  # Chroma's HttpClient: connect / read / protocol errors
)
#: Never retried, whatever caused them: the same input fails the same way every time.
DATA_ERROR_TYPES: tuple[type[BaseException], ...] = (
    DimensionMismatchError,
    StoreFullError,  # wraps disk_full (an OperationalError): a retry meets the same full disk
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.ProgrammingError,
    TypeError,
    KeyError,
)
_MAX_CHAIN = 10


def _chain(exc: BaseException):
    seen = 0
    while exc is not None and seen < _MAX_CHAIN:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def _is_configuration_error(link: BaseException) -> bool:
    """Refused credentials or an unverifiable certificate: the next attempt meets them too."""
    if isinstance(link, httpx.HTTPStatusError):
        return link.response.status_code in (401, 403)
    return isinstance(link, ssl.SSLCertVerificationError)


def is_transient(exc: BaseException) -> bool:
    """True when `exc` (or what it wraps, e.g. chromadb's ValueError around a ConnectError) is
    a connection problem a later attempt may not meet; data and configuration errors never."""
    if isinstance(exc, DATA_ERROR_TYPES):
        return False
    chain = list(_chain(exc))
    if any(_is_configuration_error(link) for link in chain):
        return False
    return any(isinstance(link, TRANSIENT_TYPES) for link in chain)
