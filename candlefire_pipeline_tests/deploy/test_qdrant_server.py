"""Qdrant server mode (CANDLEFIRE_QDRANT_URL + CANDLEFIRE_QDRANT_API_KEY), as far as it goes here.

No Qdrant server can be installed on this machine (no PyPI, Debian or npm package ships one,
and no container engine runs), so these tests never claim a working server: they drive the real
client against endpoints that fail -- a closed port, and a loopback HTTP endpoint that records
what the client sends and refuses it like a server with another API key -- and check the URL and
key travel from the environment to the wire, errors are clear, and the key is never shown.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.qdrant.backend import QdrantBackend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, materialized, pipeline_env
from candlefire_pipeline_tests.reliability.helpers import files_containing

SECRET = f"qk-{uuid.uuid4().hex}-secret"


class Refusing(BaseHTTPRequestHandler):
    """Answers every request like a Qdrant server whose API key differs: 403 and a JSON body."""

    def _refuse(self) -> None:
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        body = json.dumps({"status": {"error": "Invalid api-key"}, "time": 0}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = _refuse

    def log_message(self, *args) -> None:  # quiet test output
        pass


@pytest.fixture
def refusing_server():
    server = ThreadingHTTPServer(("127.0.0.1", procs.free_port()), Refusing)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def url_of(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_a_closed_port_is_a_clear_error_without_the_key(caplog):
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{procs.free_port()}"  # nothing listens there
    with pytest.raises(BackendUnavailableError, match=f"cannot use Qdrant at {url}") as caught:
        QdrantBackend(url=url, api_key=SECRET, timeout=5)
    assert SECRET not in "".join(traceback.format_exception(caught.value)) + caplog.text


def test_the_key_goes_in_the_header_and_a_refusal_is_a_clear_error(refusing_server, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError, match="403") as caught:
        QdrantBackend(url=url_of(refusing_server) + "/", api_key=SECRET, timeout=5)
    assert ("GET", "/collections") in [(m, p) for m, p, _ in refusing_server.seen]
    # every request carries the key, the header a real server authenticates
    assert {h.get("api-key") for _, _, h in refusing_server.seen} == {SECRET}
    shown = "".join(traceback.format_exception(caught.value)) + caplog.text
    assert "Invalid api-key" in shown and SECRET not in shown


def test_settings_route_url_and_key_from_the_environment(refusing_server, monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CANDLEFIRE_QDRANT_URL", url_of(refusing_server))
    monkeypatch.setenv("CANDLEFIRE_QDRANT_API_KEY", SECRET)
    settings = Settings.from_env()
    assert SECRET not in repr(settings)
    with pytest.raises(BackendUnavailableError):
        open_backend("qdrant", settings)
    assert refusing_server.seen[-1][2].get("api-key") == SECRET
    resource = build_resources(settings)["qdrant"]
    assert isinstance(resource.api_key, dg.EnvVar)  # Dagster stores the name, not the value
    assert not (tmp_path / "qdrant").exists()  # server mode never touches the local folder


def test_status_and_a_failed_materialization_never_show_the_key(
    refusing_server, tmp_path, monkeypatch, capsys, caplog, pg_dsn
):
    caplog.set_level(logging.DEBUG)
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    monkeypatch.setenv("CANDLEFIRE_QDRANT_URL", url_of(refusing_server))
    monkeypatch.setenv("CANDLEFIRE_QDRANT_API_KEY", SECRET)
    drop = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = Pipeline(instance).ingest(drop, raise_on_error=False)
        record = "\n".join(dg.serialize_value(e) for e in instance.all_logs(result.run_id))
    assert not result.success and not materialized(result, "qdrant_chunks")
    assert materialized(result, "pgvector_chunks") and materialized(result, "chroma_chunks")
    assert f"cannot use Qdrant at {url_of(refusing_server)}" in record
    assert candlefire(["status"]) == 2
    out, err = capsys.readouterr()
    assert "qdrant: UNREACHABLE" in out
    for text in (record, out, err, caplog.text):
        assert SECRET not in text
    assert not files_containing(tmp_path, SECRET)
