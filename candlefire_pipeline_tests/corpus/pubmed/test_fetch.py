"""fetch_pubmed against hand-written E-utilities answers: a fake transport or a local server."""

from __future__ import annotations

import http.client
import http.server
import json
import logging
import urllib.error
from datetime import date

import pytest

from candlefire_pipeline.corpus import pubmed as pf
from candlefire_pipeline.corpus.medline import iter_medline
from candlefire_pipeline.corpus.records import Accepted
from candlefire_pipeline_tests.eutils_fake import (
    KEY,
    NOW,
    PMIDS,
    FakeEutils,
    fetch,
    http_error,
    recorded,
    written_pmids,
)


def test_search_uses_history_and_efetch_pages_through_it(tmp_path):
    fake = FakeEutils()
    result = fetch(fake, tmp_path, batch_size=3, until=date(2025, 5, 31))
    search, *pages = fake.calls
    assert search.utility == "esearch"
    assert search.params == {
        "db": "pubmed", "term": "amyotrophic lateral sclerosis", "usehistory": "y",
        "retmode": "json", "retmax": "0", "datetype": "edat", "mindate": "2025/01/01",
        "maxdate": "2025/05/31", "tool": "candlefire_pipeline", "email": "lab@example.org",
    }  # fmt: skip
    assert [c.utility for c in pages] == ["efetch", "efetch"]
    assert [(c.params["retstart"], c.params["retmax"]) for c in pages] == [("0", "3"), ("3", "2")]
    for page in pages:  # the history handle from esearch_als_count5.json, never an id list
        assert page.params["WebEnv"] == "MCID_6650a1f2e4b0c12a3f5d9e71"
        assert page.params["query_key"] == "1" and page.params["retmode"] == "xml"
        assert "id" not in page.params and "api_key" not in page.params
    assert (result.count, result.requests, result.retries) == (5, 3, 0)


def test_drop_file_is_one_pubmed_article_set_with_every_batch(tmp_path):
    result = fetch(FakeEutils(), tmp_path, batch_size=2, api_key=KEY)
    # stamped at completion: 3 pages after the search, 0.1 s apart with a key -> still 12:00:00
    assert result.path == tmp_path / "20250602T120000Z-pubmed.xml"
    assert [p.name for p in tmp_path.iterdir()] == [result.path.name]  # no .part left over
    assert written_pmids(result.path) == PMIDS
    text = result.path.read_text(encoding="utf-8")
    assert "Müller" in text and "β-adrenergic" in text and "<sup>Q331K</sup>" in text


def test_max_records_caps_the_pages(tmp_path):
    fake = FakeEutils()
    result = fetch(fake, tmp_path, batch_size=3, max_records=4)
    assert [(c.params["retstart"], c.params["retmax"]) for c in fake.calls[1:]] == [
        ("0", "3"),
        ("3", "1"),
    ]
    assert written_pmids(result.path) == PMIDS[:4]


def test_429_is_retried_after_the_servers_retry_after(tmp_path):
    busy = lambda url: http_error(url, 429, "7", recorded("rate_limit_429.json"))  # noqa: E731
    fake = FakeEutils(failures={("esearch", None): [busy]})
    result = fetch(fake, tmp_path)
    assert (result.retries, result.requests, result.count) == (1, 3, 5)
    assert fake.sleeps[0] == 7.0  # Retry-After beats the 1 s first backoff
    assert fake.calls[1].at - fake.calls[0].at == 7.0


@pytest.mark.parametrize(
    "failure",
    [
        lambda url: http_error(url, 503),
        lambda url: ConnectionResetError(104, "Connection reset by peer"),
        lambda url: urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
        lambda url: TimeoutError("timed out"),
        lambda url: http.client.IncompleteRead(b"<PubmedArticleSet>"),
        lambda url: recorded("efetch_als_retstart3.xml")[:700],  # 200 with a cut-off body
    ],
)
def test_transient_failures_on_a_page_are_retried(tmp_path, failure):
    fake = FakeEutils(failures={("efetch", "3"): [failure]})
    result = fetch(fake, tmp_path, batch_size=3)
    assert (result.retries, result.requests) == (1, 4)
    assert written_pmids(result.path) == PMIDS


def test_exhausted_retries_raise_and_leave_no_file(tmp_path):
    down = lambda url: http_error(url, 503, body=b"Service Unavailable")  # noqa: E731
    fake = FakeEutils(failures={("efetch", "3"): [down] * pf.MAX_ATTEMPTS})
    with pytest.raises(pf.PubmedFetchError, match=r"efetch failed 5 times, last: HTTP 503"):
        fetch(fake, tmp_path, batch_size=3)
    assert list(tmp_path.iterdir()) == []  # the first page had been written to a .part
    backoffs = [s for s in fake.sleeps if s >= 1.0]
    assert backoffs == [1.0, 2.0, 4.0, 8.0]  # exponential, and no sleep after the last attempt
    assert len(fake.calls) == 1 + 1 + pf.MAX_ATTEMPTS


@pytest.mark.parametrize(
    ("failures", "message"),
    [
        ({("esearch", None): [lambda url: http_error(url, 400)]}, "esearch failed: HTTP 400"),
        (
            {("esearch", None): [recorded("esearch_error.json")]},
            "rejected the query: Invalid query",
        ),
        ({("efetch", "0"): [recorded("efetch_error.xml")]}, "Unable to obtain query #1"),
    ],
)
def test_permanent_errors_fail_at_once(tmp_path, failures, message):
    fake = FakeEutils(failures=failures)
    with pytest.raises(pf.PubmedFetchError, match=message):
        fetch(fake, tmp_path)
    assert fake.sleeps == [] or max(fake.sleeps) < 1.0  # rate-limit waits only, no backoff
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("api_key", "interval"), [(None, 1 / 3), (KEY, 1 / 10)])
def test_requests_are_spaced_by_the_ncbi_rate_limit(tmp_path, api_key, interval):
    fake = FakeEutils(latency=0.05)
    fetch(fake, tmp_path, batch_size=1, api_key=api_key)
    gaps = [b.at - a.at for a, b in zip(fake.calls, fake.calls[1:], strict=False)]
    assert len(gaps) == 5
    # the limiter waits out only what the request itself did not already take
    assert all(gap == pytest.approx(interval) for gap in gaps)
    assert all(s == pytest.approx(interval - 0.05) for s in fake.sleeps)


def test_api_key_is_sent_but_never_logged_or_raised(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger=pf.__name__)
    busy = lambda url: http_error(url, 429, "1", recorded("rate_limit_429.json"))  # noqa: E731
    unreachable = lambda url: OSError(f"cannot reach {url}")  # noqa: E731
    fake = FakeEutils(failures={("efetch", "0"): [unreachable] + [busy] * 4})
    with pytest.raises(pf.PubmedFetchError) as raised:
        fetch(fake, tmp_path, api_key=KEY)
    assert all(f"api_key={KEY}" in call.url for call in fake.calls)
    assert "api_key=<redacted>" in caplog.text and "API rate limit exceeded" in str(raised.value)
    assert KEY not in str(raised.value) and KEY not in caplog.text


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        (
            "x.fcgi?db=pubmed&api_key=abc123&tool=t",
            None,
            "x.fcgi?db=pubmed&api_key=<redacted>&tool=t",
        ),
        ('{"api-key":"abc123"}', "abc123", '{"api-key":"<redacted>"}'),
        ("key=a%2Bb", "a+b", "key=<redacted>"),
        ("nothing secret", "abc123", "nothing secret"),
    ],
)
def test_redact(text, key, expected):
    assert pf.redact(text, key) == expected


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), (" 0 ", 0.0), ("Mon, 02 Jun 2025 12:00:30 GMT", 30.0), ("soon", None), ("", None)],
)
def test_retry_after_seconds(header, seconds):
    assert pf.retry_after_seconds(header, now=NOW) == seconds


def test_zero_results_write_no_file(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=pf.__name__)
    fake = FakeEutils(esearch=recorded("esearch_zero.json"))
    result = fetch(fake, tmp_path / "drops", query="SPG999X")
    assert result == pf.FetchResult(path=None, count=0, requests=1, retries=0)
    assert not (tmp_path / "drops").exists()
    assert "no drop file created" in caplog.text


def test_more_than_pubmed_serves_is_an_error_unless_capped(tmp_path):
    doc = json.loads(recorded("esearch_als_count5.json"))
    doc["esearchresult"]["count"] = "12345"
    fake = FakeEutils(esearch=json.dumps(doc).encode())
    with pytest.raises(pf.PubmedFetchError, match="matched 12345 records.*at most 10000"):
        fetch(fake, tmp_path)
    assert [c.utility for c in fake.calls] == ["esearch"]
    assert fetch(FakeEutils(esearch=json.dumps(doc).encode()), tmp_path, max_records=5).count == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query must not be empty"),
        ({"query": "   "}, "query must not be empty"),
        ({"since": date(2025, 6, 3)}, "in the future"),
        ({"since": date(2025, 3, 2), "until": date(2025, 3, 1)}, "after until"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 10_001}, "batch_size"),
        ({"max_records": 0}, "max_records"),
        ({"datetype": "xdat"}, "datetype"),
        ({"email": "lab at example.org"}, "email"),
    ],
)
def test_bad_inputs_are_rejected_before_any_request(tmp_path, kwargs, message):
    fake = FakeEutils()
    with pytest.raises(ValueError, match=message):
        fetch(fake, tmp_path, **kwargs)
    assert fake.calls == []


def test_a_drop_landing_in_the_same_second_is_never_overwritten(tmp_path):
    earlier = tmp_path / "20250602T120000Z-pubmed.xml"
    earlier.write_bytes(b"<PubmedArticleSet/>")
    result = fetch(FakeEutils(), tmp_path, api_key=KEY)
    assert earlier.read_bytes() == b"<PubmedArticleSet/>"
    assert result.path.name == "20250602T120001Z-pubmed.xml"  # waited for the next second
    assert sorted(p.name for p in tmp_path.iterdir()) == [earlier.name, result.path.name]


def test_the_drop_file_reads_back_through_the_medline_reader(tmp_path):
    result = fetch(FakeEutils(), tmp_path, batch_size=2)
    outcomes = list(iter_medline(result.path))
    assert all(isinstance(outcome, Accepted) for outcome in outcomes)
    papers = {outcome.paper["pmid"]: outcome.paper for outcome in outcomes}
    assert list(papers) == PMIDS
    assert papers["39900101"]["doi"] == "10.5555/candlefire.2025.0101"
    assert "TDP-43" in papers["39900101"]["title"]
    assert "SPG 302" in papers["39900104"]["abstract"]
