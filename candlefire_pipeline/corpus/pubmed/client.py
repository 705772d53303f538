"""The E-utilities HTTP client: rate limit, bounded retries with backoff, a redacted api key."""

from __future__ import annotations

import email.utils
import http.client
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

log = logging.getLogger(__name__)

EUTILS_BASE = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
TOOL_NAME = "candlefire_pipeline"
#: NCBI policy: 3 requests/s per IP without an API key, 10 with one.
RATE_WITHOUT_KEY = 3.0
RATE_WITH_KEY = 10.0
MAX_ATTEMPTS = 5
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 300.0
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
REQUEST_TIMEOUT_S = 60.0

_API_KEY_PARAM = re.compile(r"(api_key=)[^&\s\"']+", re.IGNORECASE)
_REDACTED = "<redacted>"

T = TypeVar("T")
#: Takes a full URL, returns the body; raises HTTPError for HTTP errors, OSError when unreachable.
Transport = Callable[[str], bytes]


class PubmedFetchError(RuntimeError):
    """E-utilities failed for good: a non-retryable answer, or retries exhausted."""


class TransientBodyError(Exception):
    """A 200 answer whose body is cut short or garbled; worth another attempt."""


def urllib_transport(url: str) -> bytes:
    """Default transport: one GET through urllib.request."""
    request = urllib.request.Request(url, headers={"User-Agent": TOOL_NAME})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        return response.read()


def redact(text: str, api_key: str | None) -> str:
    """Text safe to log: the api_key parameter and any echo of the key itself are masked."""
    text = _API_KEY_PARAM.sub(r"\1" + _REDACTED, text)
    if api_key:
        for form in {api_key, urllib.parse.quote_plus(api_key), urllib.parse.quote(api_key)}:
            text = text.replace(form, _REDACTED)
    return text


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delta-seconds or HTTP-date); None if absent/bad."""
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).replace(tzinfo=UTC)  # HTTP dates are GMT
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class EutilsClient:
    """GETs with rate limiting, bounded retries with backoff, and a redacted api key."""

    def __init__(self, base_url, api_key, email, transport, sleep, clock) -> None:
        self._base = base_url.rstrip("/")
        self._api_key = api_key
        self._common = {"tool": TOOL_NAME, "email": email, "api_key": api_key}
        self._transport, self._sleep, self._clock = transport, sleep, clock
        self._interval = 1.0 / (RATE_WITH_KEY if api_key else RATE_WITHOUT_KEY)
        self._last_sent: float | None = None
        self.requests = self.retries = 0

    def get(self, utility: str, params: dict[str, Any], parse: Callable[[bytes], T]) -> T:
        query = {**params, **{k: v for k, v in self._common.items() if v}}
        url = f"{self._base}/{utility}.fcgi?{urllib.parse.urlencode(query)}"
        shown = redact(url, self._api_key)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            self._throttle()
            log.debug("GET %s (attempt %d)", shown, attempt)
            try:
                return parse(self._transport(url))
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}{self._body_excerpt(exc)}"
                if exc.code not in RETRYABLE_STATUS:
                    raise PubmedFetchError(f"{utility} failed: {problem} for {shown}") from None
                hinted = retry_after_seconds(exc.headers.get("Retry-After", ""))
            except (OSError, http.client.HTTPException, TransientBodyError) as exc:
                problem, hinted = redact(f"{type(exc).__name__}: {exc}", self._api_key), None
            except PubmedFetchError as exc:
                raise PubmedFetchError(f"{redact(str(exc), self._api_key)} ({shown})") from None
            if attempt < MAX_ATTEMPTS:
                self._back_off(utility, attempt, problem, hinted)
        raise PubmedFetchError(f"{utility} failed {MAX_ATTEMPTS} times, last: {problem} ({shown})")

    def _throttle(self) -> None:
        if self._last_sent is not None:
            remaining = self._last_sent + self._interval - self._clock()
            if remaining > 0:
                self._sleep(remaining)
        self._last_sent = self._clock()
        self.requests += 1

    def _back_off(self, utility: str, attempt: int, problem: str, hinted: float | None) -> None:
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
        if hinted is not None:
            delay = min(RETRY_AFTER_CAP_S, max(delay, hinted))
        log.warning("%s attempt %d: %s; retrying in %.1f s", utility, attempt, problem, delay)
        self.retries += 1
        self._sleep(delay)

    def _body_excerpt(self, exc: urllib.error.HTTPError) -> str:
        try:
            body = exc.read()[:200].decode("utf-8", errors="replace").strip()
        except Exception:  # the body is only decoration for the message
            return ""
        return f" ({redact(body, self._api_key)})" if body else ""
