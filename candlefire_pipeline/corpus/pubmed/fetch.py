"""fetch_pubmed: search PubMed for a query and date window, write every match as one drop."""

from __future__ import annotations

import logging
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from candlefire_pipeline.corpus.pubmed.client import (
    EUTILS_BASE,
    EutilsClient,
    PubmedFetchError,
    Transport,
    urllib_transport,
)
from candlefire_pipeline.corpus.pubmed.drops import write_drop
from candlefire_pipeline.corpus.pubmed.parse import Search, parse_efetch, parse_esearch

log = logging.getLogger(__name__)

#: PubMed hands out at most this many records of one search, history server included.
PUBMED_RECORD_LIMIT = 10_000
DATE_TYPES = ("edat", "mdat", "pdat")
#: Records per efetch request (the CLI, the fetch job and the resource default to it).
EFETCH_BATCH = 500


@dataclass(frozen=True)
class FetchResult:
    path: Path | None  # None when nothing matched (no file is written)
    count: int  # articles written to path
    requests: int  # HTTP requests sent, retries included
    retries: int


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


def _article_batches(
    client: EutilsClient, search: Search, total: int, batch_size: int
) -> Iterator[list[ET.Element]]:
    history = {"db": "pubmed", "query_key": search.query_key, "WebEnv": search.webenv}
    for retstart in range(0, total, batch_size):
        retmax = min(batch_size, total - retstart)
        batch = {**history, "retstart": retstart, "retmax": retmax, "retmode": "xml"}
        articles = client.get("efetch", batch, parse_efetch)
        if len(articles) != retmax:  # records withdrawn since the search, typically
            log.warning("efetch at %d: %d articles, expected %d", retstart, len(articles), retmax)
        log.info("fetched %d/%d PubMed records", retstart + retmax, total)
        yield articles


def fetch_pubmed(
    query: str,
    since: date,
    drops_dir: Path,
    *,
    until: date | None = None,
    api_key: str | None = None,
    email: str | None = None,
    batch_size: int = EFETCH_BATCH,
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
    client = EutilsClient(base_url, api_key, email, transport or urllib_transport, sleep, clock)
    term = {"db": "pubmed", "term": query.strip(), "usehistory": "y", "retmode": "json"}
    dates = {"datetype": datetype, "mindate": f"{since:%Y/%m/%d}", "maxdate": f"{until:%Y/%m/%d}"}
    # retmax=0: the ids stay on the history server; efetch pages through them there
    search = client.get("esearch", {**term, **dates, "retmax": 0}, parse_esearch)
    log.info("PubMed %r %s..%s [%s]: %d records", query, since, until, datetype, search.count)
    total = _records_to_fetch(search.count, max_records)
    path, written = None, 0
    if total:
        batches = _article_batches(client, search, total, batch_size)
        path, written = write_drop(Path(drops_dir), batches, utcnow, sleep)
    if path is None:
        log.info("no PubMed records to write for %r since %s; no drop file created", query, since)
    else:
        log.info("wrote %d PubMed records to %s", written, path)
    return FetchResult(path, written, client.requests, client.retries)
