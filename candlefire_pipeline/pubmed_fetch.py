"""Fetch PubMed records through NCBI E-utilities (esearch + efetch) into one new drop file."""

from __future__ import annotations

import argparse
import email.utils
import http.client
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections import namedtuple
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

EUTILS_BASE = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
TOOL_NAME = "candlefire_pipeline"
#: PubMed hands out at most this many records of one search, history server included.
PUBMED_RECORD_LIMIT = 10_000
#: NCBI policy: 3 requests/s per IP without an API key, 10 with one.
RATE_WITHOUT_KEY = 3.0
RATE_WITH_KEY = 10.0
MAX_ATTEMPTS = 5
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 300.0
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
REQUEST_TIMEOUT_S = 60.0
DATE_TYPES = ("edat", "mdat", "pdat")
ARTICLE_TAGS = frozenset({"PubmedArticle", "PubmedBookArticle"})

_XML_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<PubmedArticleSet>\n'
_XML_TAIL = b"</PubmedArticleSet>\n"
_API_KEY_PARAM = re.compile(r"(api_key=)[^&\s\"']+", re.IGNORECASE)
_REDACTED = "<redacted>"

T = TypeVar("T")
_Search = namedtuple("_Search", "count webenv query_key")
#: Takes a full URL, returns the body; raises HTTPError for HTTP errors, OSError when unreachable.
Transport = Callable[[str], bytes]


class PubmedFetchError(RuntimeError):
    """E-utilities failed for good: a non-retryable answer, or retries exhausted."""


class _TransientBodyError(Exception):
    """A 200 answer whose body is cut short or garbled; worth another attempt."""


@dataclass(frozen=True)
class FetchResult:
    path: Path | None  # None when nothing matched (no file is written)
    count: int  # articles written to path
    requests: int  # HTTP requests sent, retries included
    retries: int


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


class _EutilsClient:
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
            except (OSError, http.client.HTTPException, _TransientBodyError) as exc:
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
        except Exception:  # noqa: BLE001 - the body is only decoration for the message
            return ""
        return f" ({redact(body, self._api_key)})" if body else ""


def _parse_esearch(body: bytes) -> _Search:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise _TransientBodyError(f"esearch answer is not JSON: {exc}") from None
    result = doc.get("esearchresult") if isinstance(doc, dict) else None
    if not isinstance(result, dict):
        raise PubmedFetchError(f"esearch answer has no esearchresult: {str(doc)[:200]}")
    if "ERROR" in result:
        raise PubmedFetchError(f"esearch rejected the query: {result['ERROR']}")
    try:
        count = int(result.get("count", 0))
    except (TypeError, ValueError):
        raise PubmedFetchError(f"esearch count is not a number: {result.get('count')!r}") from None
    webenv, query_key = result.get("webenv", ""), result.get("querykey", "")
    if count and not (webenv and query_key):
        raise PubmedFetchError("esearch returned no history handle (webenv/querykey)")
    return _Search(count, webenv, str(query_key))


def _parse_efetch(body: bytes) -> list[ET.Element]:
    try:
        root = SafeET.fromstring(body)
    except ET.ParseError as exc:
        raise _TransientBodyError(f"efetch answer is not well-formed XML: {exc}") from None
    except DefusedXmlException as exc:
        raise PubmedFetchError(f"efetch answer uses forbidden XML constructs: {exc!r}") from None
    if root.tag != "PubmedArticleSet":
        detail = root.findtext("ERROR") or root.tag
        raise PubmedFetchError(f"efetch returned no PubmedArticleSet: {detail}")
    return [child for child in root if child.tag in ARTICLE_TAGS]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _validate(query, since, until, today, batch_size, max_records, datetype, email) -> None:
    if not query or not query.strip():
        raise ValueError("query must not be empty")
    if since > today:
        raise ValueError(f"since {since} is in the future (today is {today} UTC)")
    if since > until:
        raise ValueError(f"since {since} is after until {until}")
    if not 1 <= batch_size <= PUBMED_RECORD_LIMIT:
        raise ValueError(f"batch_size must be 1..{PUBMED_RECORD_LIMIT}, got {batch_size}")
    if max_records is not None and max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")
    if datetype not in DATE_TYPES:
        raise ValueError(f"datetype must be one of {DATE_TYPES}, got {datetype!r}")
    if email is not None and (not email.strip() or re.search(r"\s", email)):
        raise ValueError(f"email must be an address without spaces, got {email!r}")


def _records_to_fetch(found: int, max_records: int | None) -> int:
    wanted = found if max_records is None else min(found, max_records)
    if wanted > PUBMED_RECORD_LIMIT:
        raise PubmedFetchError(
            f"the search matched {found} records but PubMed serves at most "
            f"{PUBMED_RECORD_LIMIT} per search: narrow the date range or set max_records"
        )
    if wanted < found:
        log.warning("fetching %d of %d matching records (max_records)", wanted, found)
    return wanted


def _article_batches(client, search, total: int, batch_size: int) -> Iterator[list[ET.Element]]:
    history = {"db": "pubmed", "query_key": search.query_key, "WebEnv": search.webenv}
    for retstart in range(0, total, batch_size):
        retmax = min(batch_size, total - retstart)
        batch = {**history, "retstart": retstart, "retmax": retmax, "retmode": "xml"}
        articles = client.get("efetch", batch, _parse_efetch)
        if len(articles) != retmax:  # records withdrawn since the search, typically
            log.warning("efetch at %d: %d articles, expected %d", retstart, len(articles), retmax)
        log.info("fetched %d/%d PubMed records", retstart + retmax, total)
        yield articles


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _publish(part: Path, utcnow: Callable[[], datetime], sleep: Callable) -> Path:
    """Give the finished file its final name, stamped now so names sort in arrival order."""
    for _ in range(3):
        final = part.with_name(f"{_stamp(utcnow())}-pubmed.xml")
        try:
            os.link(part, final)  # unlike rename, never overwrites a drop that landed this second
        except FileExistsError:
            sleep(1.0)
            continue
        part.unlink()
        return final
    raise FileExistsError(f"{final} keeps existing; is another fetch writing to {part.parent}?")


def _write_drop(drops_dir: Path, batches, utcnow, sleep) -> tuple[Path | None, int]:
    drops_dir.mkdir(parents=True, exist_ok=True)
    part = drops_dir / f"{_stamp(utcnow())}-pubmed.xml.part"
    out = part.open("xb")  # outside the try: a clash must not delete the other writer's file
    try:
        with out:
            out.write(_XML_HEAD)
            written = 0
            for articles in batches:
                for article in articles:
                    article.tail = "\n"
                    out.write(ET.tostring(article, encoding="utf-8", xml_declaration=False))
                written += len(articles)
            out.write(_XML_TAIL)
            out.flush()
            os.fsync(out.fileno())
        if written == 0:
            part.unlink()
            return None, 0
        return _publish(part, utcnow, sleep), written
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def fetch_pubmed(
    query: str,
    since: date,
    drops_dir: Path,
    *,
    until: date | None = None,
    api_key: str | None = None,
    email: str | None = None,
    batch_size: int = 500,
    max_records: int | None = None,
    datetype: str = "edat",
    base_url: str = EUTILS_BASE,
    transport: Transport | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    utcnow: Callable[[], datetime] = _utcnow,
) -> FetchResult:
    """Search PubMed for query within [since, until] by datetype and write one drop file."""
    today = utcnow().astimezone(UTC).date()
    until = until or today
    api_key = api_key.strip() if api_key and api_key.strip() else None
    _validate(query, since, until, today, batch_size, max_records, datetype, email)
    client = _EutilsClient(base_url, api_key, email, transport or urllib_transport, sleep, clock)
    term = {"db": "pubmed", "term": query.strip(), "usehistory": "y", "retmode": "json"}
    dates = {"datetype": datetype, "mindate": f"{since:%Y/%m/%d}", "maxdate": f"{until:%Y/%m/%d}"}
    # retmax=0: the ids stay on the history server; efetch pages through them there
    search = client.get("esearch", {**term, **dates, "retmax": 0}, _parse_esearch)
    log.info("PubMed %r %s..%s [%s]: %d records", query, since, until, datetype, search.count)
    total = _records_to_fetch(search.count, max_records)
    path, written = None, 0
    if total:
        batches = _article_batches(client, search, total, batch_size)
        path, written = _write_drop(Path(drops_dir), batches, utcnow, sleep)
    if path is None:
        log.info("no PubMed records to write for %r since %s; no drop file created", query, since)
    else:
        log.info("wrote %d PubMed records to %s", written, path)
    return FetchResult(path, written, client.requests, client.retries)


def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `candlefire fetch-pubmed`."""
    iso_date = date.fromisoformat
    parser.add_argument("--query", required=True, help="PubMed query, e.g. 'SPG302 OR TDP-43'")
    parser.add_argument("--since", required=True, type=iso_date, help="first date, YYYY-MM-DD")
    parser.add_argument("--until", type=iso_date, help="last date, YYYY-MM-DD (default: today)")
    parser.add_argument("--max", dest="max_records", type=int, help="fetch at most N records")
    parser.add_argument("--batch-size", type=int, default=500, help="records per efetch request")
    parser.add_argument("--datetype", choices=DATE_TYPES, default="edat", help="edat: added")
    parser.add_argument("--drops-dir", type=Path, help="default: the configured drops folder")


def main_fetch(
    args: argparse.Namespace,
    *,
    settings: Settings | None = None,
    transport: Transport | None = None,
) -> int:
    """Run `candlefire fetch-pubmed`: 0 ok (also when nothing matched), 1 failed, 2 bad input."""
    options = {k: getattr(args, k) for k in ("until", "batch_size", "max_records", "datetype")}
    try:
        settings = settings or Settings.from_env()
        drops_dir = args.drops_dir or settings.drops_dir
        credentials = {"api_key": settings.ncbi_api_key, "email": settings.ncbi_email}
        result = fetch_pubmed(
            args.query, args.since, drops_dir, **options, **credentials, transport=transport
        )
    except (ValueError, PubmedFetchError, OSError) as exc:
        log.error("fetch-pubmed failed: %s", exc)
        return 2 if isinstance(exc, ValueError) else 1
    log.info("fetch-pubmed: %d requests, %d retries", result.requests, result.retries)
    return 0
