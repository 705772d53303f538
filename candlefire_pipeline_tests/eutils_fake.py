"""A recorded NCBI E-utilities: fake transport and helpers shared by the fetch tests."""

from __future__ import annotations

import io
import urllib.error
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from email.message import Message
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import defusedxml.ElementTree as SafeET

from candlefire_pipeline.corpus import pubmed as pf

RECORDED = Path(__file__).parent / "recorded"
#: The PMIDs written into the recorded efetch answers, in order (3 in retstart0, 2 in retstart3).
PMIDS = ["39900101", "39900102", "39900103", "39900104", "39900105"]
KEY = "RECORDEDFAKEKEY0000"  # the key rate_limit_429.json echoes back, as NCBI does
NOW = datetime(2025, 6, 2, 12, 0, 0, tzinfo=UTC)
SINCE = date(2025, 1, 1)


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def recorded_articles() -> list:
    files = ("efetch_als_retstart0.xml", "efetch_als_retstart3.xml")
    return [child for name in files for child in SafeET.fromstring(recorded(name))]


def efetch_answer(retstart: int, retmax: int) -> bytes:
    """The recorded file when the page matches one, else a PubmedArticleSet cut from them."""
    name = RECORDED / f"efetch_als_retstart{retstart}.xml"
    if name.exists() and len(SafeET.fromstring(name.read_bytes())) == retmax:
        return name.read_bytes()
    body = b"".join(SafeET.tostring(a) for a in recorded_articles()[retstart : retstart + retmax])
    return b"<?xml version='1.0'?>\n<PubmedArticleSet>" + body + b"</PubmedArticleSet>"


def http_error(url: str, code: int, retry_after: str | None = None, body: bytes = b""):
    headers = Message()
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return urllib.error.HTTPError(url, code, "error", headers, io.BytesIO(body))


@dataclass
class Call:
    at: float
    utility: str
    params: dict
    url: str


@dataclass
class FakeEutils:
    """Transport + clock: answers from recorded files; scripted failures are served first."""

    esearch: bytes = field(default_factory=lambda: recorded("esearch_als_count5.json"))
    failures: dict = field(default_factory=dict)  # (utility, retstart|None) -> [exc or bytes]
    latency: float = 0.0
    now: float = 1000.0
    calls: list = field(default_factory=list)
    sleeps: list = field(default_factory=list)

    def __call__(self, url: str) -> bytes:
        parts = urlsplit(url)
        utility = parts.path.rsplit("/", 1)[-1].removesuffix(".fcgi")
        params = dict(parse_qsl(parts.query))
        self.calls.append(Call(self.now, utility, params, url))
        self.now += self.latency
        queue = self.failures.get((utility, params.get("retstart")), [])
        if queue:
            item = queue.pop(0)
            item = item(url) if callable(item) else item
            if isinstance(item, BaseException):
                raise item
            return item
        if utility == "esearch":
            return self.esearch
        return efetch_answer(int(params["retstart"]), int(params["retmax"]))

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def utcnow(self) -> datetime:
        return NOW + timedelta(seconds=self.now - 1000.0)


def fetch(fake: FakeEutils, drops: Path, **kwargs) -> pf.FetchResult:
    kwargs.setdefault("email", "lab@example.org")
    return pf.fetch_pubmed(
        kwargs.pop("query", "amyotrophic lateral sclerosis"), kwargs.pop("since", SINCE), drops,
        transport=fake, sleep=fake.sleep, clock=fake.clock, utcnow=fake.utcnow, **kwargs,
    )  # fmt: skip


def written_pmids(path: Path) -> list[str]:
    root = SafeET.parse(path).getroot()
    assert root.tag == "PubmedArticleSet"
    return [article.findtext("MedlineCitation/PMID") for article in root]
