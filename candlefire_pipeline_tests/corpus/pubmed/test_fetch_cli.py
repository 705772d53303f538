"""fetch-pubmed over real HTTP (a local server) and through its command line."""

from __future__ import annotations

import argparse
import http.client
import http.server
import threading
from types import SimpleNamespace

import pytest

from candlefire_pipeline import cli
from candlefire_pipeline.corpus import pubmed as pf
from candlefire_pipeline_tests.eutils_fake import (
    KEY,
    PMIDS,
    SINCE,
    FakeEutils,
    http_error,
    recorded,
    written_pmids,
)


class _RecordedEutilsHandler(http.server.BaseHTTPRequestHandler):
    """Serves the recorded answers; the first esearch gets NCBI's 429 with Retry-After."""

    fake: FakeEutils
    throttled: list

    def do_GET(self) -> None:
        if "esearch" in self.path and not self.throttled:
            self.throttled.append(self.path)
            return self._send(429, recorded("rate_limit_429.json"), {"Retry-After": "2"})
        self._send(200, self.fake(f"http://127.0.0.1{self.path}"))

    def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def eutils_server():
    fake = FakeEutils()
    handler = type("Handler", (_RecordedEutilsHandler,), {"fake": fake, "throttled": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}/entrez/eutils/"
    server.shutdown()
    server.server_close()


def test_default_urllib_transport_against_a_local_server(tmp_path, eutils_server):
    fake, base_url = eutils_server
    result = pf.fetch_pubmed(
        "amyotrophic lateral sclerosis", SINCE, tmp_path, base_url=base_url, batch_size=3,
        api_key=KEY, sleep=fake.sleep, clock=fake.clock, utcnow=fake.utcnow,
    )  # fmt: skip
    assert (result.count, result.requests, result.retries) == (5, 4, 1)
    assert fake.sleeps[0] == 2.0  # the server's Retry-After, read from the real HTTP header
    assert written_pmids(result.path) == PMIDS
    assert fake.calls[0].url.startswith("http://127.0.0.1/entrez/eutils/esearch.fcgi?")


def parse_fetch_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="candlefire fetch-pubmed")
    cli.add_fetch_arguments(parser)
    return parser.parse_args(["--query", "SPG302 OR TDP-43", "--since", "2025-01-01", *argv])


def test_cmd_fetch_writes_into_the_configured_drops_dir(tmp_path, capsys):
    settings = SimpleNamespace(drops_dir=tmp_path / "drops", ncbi_api_key=KEY, ncbi_email=None)
    fake = FakeEutils()
    args = parse_fetch_args("--until", "2025-05-31", "--max", "4")
    assert cli.cmd_fetch(args, settings, transport=fake) == 0
    (drop,) = (tmp_path / "drops").iterdir()
    assert capsys.readouterr().out.startswith(f"fetch-pubmed: 4 records in {drop} (")
    assert written_pmids(drop) == PMIDS[:4]
    assert fake.calls[0].params["term"] == "SPG302 OR TDP-43"
    assert fake.calls[0].params["maxdate"] == "2025/05/31"
    assert fake.calls[0].params["api_key"] == KEY and "email" not in fake.calls[0].params


@pytest.mark.parametrize(
    ("argv", "failures", "code"),
    [
        (("--batch-size", "0"), {}, 2),
        (("--until", "2024-12-31"), {}, 2),
        ((), {("esearch", None): [lambda url: http_error(url, 400)]}, 1),
    ],
)
def test_cmd_fetch_exit_codes(tmp_path, caplog, capsys, argv, failures, code):
    settings = SimpleNamespace(drops_dir=tmp_path, ncbi_api_key=KEY, ncbi_email=None)
    args = parse_fetch_args("--drops-dir", str(tmp_path / "cli"), *argv)
    assert cli.cmd_fetch(args, settings, transport=FakeEutils(failures=failures)) == code
    out, err = capsys.readouterr()
    assert err.startswith("candlefire fetch-pubmed: failed: ") and out == ""
    assert KEY not in err + caplog.text
    assert list(tmp_path.iterdir()) == []


def test_cli_rejects_a_malformed_date():
    with pytest.raises(SystemExit):
        parse_fetch_args("--until", "2025-13-01")
