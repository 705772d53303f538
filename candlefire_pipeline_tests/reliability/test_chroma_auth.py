"""Security: a real `chroma run` (loopback only) behind a TLS proxy that requires a bearer token.

The proxy (token_proxy.py, the stand-in for the nginx of docs/DEPLOY.md) runs as its own
process with a self-signed certificate the test generates. Reads and writes work with the token
over verified HTTPS; without it, with a wrong one, or without the CA they fail with a clear
error; the token appears in no log record, error, Dagster event, metadata or file.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import subprocess
import sys
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable

import dagster as dg
import numpy as np
import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.chroma.client import ChromaServerAccess
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata, pipeline_env
from candlefire_pipeline_tests.reliability.helpers import ChromaServer, files_containing, paper_rows

TOKEN = "cf-chroma-T0ken-4f1c9e"  # distinctive: any leak is a plain substring
COLLECTION = "auth_test"


def _tls_material(root):
    """A self-signed certificate for 127.0.0.1 (and its key), made by openssl for this run."""
    openssl = shutil.which("openssl")
    assert openssl, "the TLS test needs the openssl command (Debian package openssl)"
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _proxy_ready(port: int, cert) -> Callable[[], bool]:
    context = ssl.create_default_context(cafile=str(cert))

    def probe() -> bool:
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/api/v2/heartbeat",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    return probe


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(https port, CA bundle, proxy log): chroma on a loopback port, the proxy in front."""
    root = tmp_path_factory.mktemp("chroma_auth")
    cert, key = _tls_material(root)
    chroma = ChromaServer(root / "chroma", root / "chroma.log")
    chroma.start()
    port, log = procs.free_port(), root / "proxy.log"
    cmd = [sys.executable, "-m", "candlefire_pipeline_tests.reliability.token_proxy", "--port",
           port, "--upstream-port", chroma.port, "--cert", cert, "--key", key]  # fmt: skip
    proxy = procs.spawn(cmd, log_path=log, env={**os.environ, "TOKEN_PROXY_TOKEN": TOKEN})
    try:
        procs.wait_until(_proxy_ready(port, cert), proc=proxy, log_path=log, what="token proxy")
        yield port, cert, log
    finally:
        procs.stop_group(proxy)
        chroma.kill()


@pytest.fixture
def chroma_env(proxied, monkeypatch, tmp_path):
    port, cert, _ = proxied
    for key, value in {
        "CANDLEFIRE_DATA_DIR": str(tmp_path / "data"),
        "CANDLEFIRE_CHROMA_HOST": "127.0.0.1",
        "CANDLEFIRE_CHROMA_PORT": str(port),
        "CANDLEFIRE_CHROMA_SSL": "true",
        "CANDLEFIRE_CHROMA_CA_BUNDLE": str(cert),
        "CANDLEFIRE_CHROMA_TOKEN": TOKEN,
        "CANDLEFIRE_CHROMA_COLLECTION": COLLECTION,
    }.items():
        monkeypatch.setenv(key, value)
    return monkeypatch


def _rendered(exc: BaseException) -> str:
    """Everything a log handler or debugger could show of an exception and its whole chain."""
    parts, seen = [], exc
    while seen is not None:
        parts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts + traceback.format_exception(exc))


def test_reads_and_writes_work_with_the_token(chroma_env, proxied, caplog):
    caplog.set_level(logging.DEBUG)
    settings = Settings.from_env()
    assert TOKEN not in repr(settings)
    store = open_backend("chroma", settings)
    try:
        store.reset()
        rows = paper_rows(["1", "2", "3"], "v1", sections=2)
        assert store.replace_papers(rows) == 6
        assert store.count() == 6 and set(store.paper_hashes()) == {"1", "2", "3"}
        assert store.contains(["v1 text 1 of paper 2"])
        vector = np.asarray(rows["embedding"][0].values.to_numpy(), dtype=np.float32)
        assert store.semantic_candidates(vector, 2)[0][0]["chunk_id"] == rows["chunk_id"][0].as_py()
        assert [r["pmid"] for r in store.fetch(Filter(pmids=("2",)))] == ["2", "2"]
        assert store.delete_papers(["3"]) == 2 and store.count() == 4
    finally:
        store.close()
    assert TOKEN not in caplog.text
    assert TOKEN not in proxied[2].read_text()  # the proxy logs request lines only
    assert '"POST /api/v2/tenants/' in proxied[2].read_text()  # ... and it did see the writes


@pytest.mark.parametrize(
    "token, why",
    [
        (None, "no token is configured (CANDLEFIRE_CHROMA_TOKEN)"),
        ("wrong-token", "the configured token was not accepted"),
        (TOKEN[:-1], "the configured token was not accepted"),
    ],
    ids=["no token", "wrong token", "truncated token"],
)
def test_without_the_right_token_reads_and_writes_fail_clearly(chroma_env, token, why, caplog):
    caplog.set_level(logging.DEBUG)
    if token is None:
        chroma_env.delenv("CANDLEFIRE_CHROMA_TOKEN")
    else:
        chroma_env.setenv("CANDLEFIRE_CHROMA_TOKEN", token)
    with pytest.raises(BackendUnavailableError) as caught:
        open_backend("chroma", Settings.from_env())
    assert str(caught.value).endswith(f"refused the request (HTTP 401): {why}")
    assert str(caught.value).startswith("Chroma at https://127.0.0.1:")
    assert TOKEN not in _rendered(caught.value) and TOKEN not in caplog.text


def test_unverifiable_certificate_is_a_clear_error(chroma_env, caplog):
    caplog.set_level(logging.DEBUG)
    chroma_env.delenv("CANDLEFIRE_CHROMA_CA_BUNDLE")  # the system store does not know our CA
    with pytest.raises(BackendUnavailableError, match="could not be verified") as caught:
        open_backend("chroma", Settings.from_env())
    assert "CANDLEFIRE_CHROMA_CA_BUNDLE" in str(caught.value)
    assert TOKEN not in _rendered(caught.value) and TOKEN not in caplog.text


@pytest.mark.parametrize("host", ["10.0.0.5", "chroma.internal.example", "0.0.0.0"])
def test_the_token_is_never_sent_in_clear_text_off_the_machine(host):
    access = ChromaServerAccess(host, 8000, token=TOKEN, ssl=False)
    with pytest.raises(ValueError, match="refusing to send the Chroma token") as caught:
        access.check()
    assert TOKEN not in _rendered(caught.value) and TOKEN not in repr(access)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_token_may_go_to_a_loopback_proxy_without_tls(host):
    ChromaServerAccess(host, 8000, token=TOKEN, ssl=False).check()


def test_ca_bundle_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="CANDLEFIRE_CHROMA_SSL is not"):
        ChromaServerAccess("h", ca_bundle=tmp_path / "ca.pem").check()
    with pytest.raises(ValueError, match="is not a file"):
        ChromaServerAccess("h", ssl=True, ca_bundle=tmp_path / "ca.pem").check()


def test_dagster_ingest_and_repair_through_the_proxy_record_no_token(
    chroma_env, pg_dsn, tmp_path, capsys, caplog
):
    caplog.set_level(logging.DEBUG)
    settings = pipeline_env(chroma_env, tmp_path / "data", pg_dsn)
    store = open_backend("chroma", settings)  # the module's server: start from an empty store
    store.reset()
    store.close()
    drop = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = Pipeline(instance).ingest(drop)
        run = instance.get_run_by_id(result.run_id)
        record = "\n".join(
            [dg.serialize_value(run)]
            + [dg.serialize_value(entry) for entry in instance.all_logs(result.run_id)]
            + [dg.serialize_value(event) for event in result.all_events]
        )
    assert result.success and metadata(result, "chroma_chunks")["rows_written"] > 0
    resource = build_resources(Settings.from_env())["chroma"]
    assert isinstance(resource.token, dg.EnvVar)  # the resource holds the variable's name only
    assert repr(resource).endswith("token='CANDLEFIRE_CHROMA_TOKEN')")
    assert candlefire(["repair", "--store", "chroma"]) == 0
    out, err = capsys.readouterr()
    assert "nothing to do" in out
    for text in (record, out, err, caplog.text):
        assert TOKEN not in text
    assert not files_containing(tmp_path, TOKEN)  # event log db, compute logs, parquet, json
