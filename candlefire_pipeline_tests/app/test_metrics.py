"""The collection's metrics (app/metrics.py): off by default (prometheus_client not even
imported); on, every call is counted by how it was answered with its latency and round trips, a
request's calls and round trips add up, what serves is a gauge, errors are counted by type, and
CANDLEFIRE_APP_METRICS_PORT serves them over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace

import pytest

from benchmarks.app import search_path as app
from candlefire_harness.netdelay import DelayProxy
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.settings import AppClientSettings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder

pytestmark = pytest.mark.server

REQUEST = ("motor neuron survival in mice", ["C9orf72", "SOD1"], ["G93A", "TDP-43"])


def sample(name: str, **labels) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def counted(how: str) -> float:
    return sum(sample("candlefire_app_calls_total", call=call, answered=how, store="pgvector",
                      generation="default") for call in ("count", "get", "query"))  # fmt: skip


def test_calls_and_requests_are_counted_with_their_round_trips(app_deployment):
    settings = replace(app_deployment.settings, app_client=AppClientSettings(metrics="prometheus"))
    with ServingCollection(settings, SeededEmbedder()) as collection:
        store = collection._follower.current()[0]
        assert store.watch.wait_for(0, timeout=60)  # the copy answers once the watch has proven
        requests = sample("candlefire_app_requests_total")
        calls = sample("candlefire_app_request_calls_sum")
        trips = sample("candlefire_app_request_round_trips_sum")
        local, before = counted("local"), store.round_trips
        with collection.request() as first:
            app.answer(collection, *REQUEST)
        with collection.request() as second:
            app.answer(collection, *REQUEST)
    assert sample("candlefire_app_requests_total") == requests + 2
    assert sample("candlefire_app_request_calls_sum") == calls + first.calls + second.calls
    assert first.calls == second.calls > 10
    assert first.round_trips == store.round_trips - before and second.round_trips == 0
    assert sample("candlefire_app_request_round_trips_sum") == trips + first.round_trips
    assert counted("local") == local + second.calls  # the repeat: every call from the copy
    assert sample("candlefire_app_serving", store="pgvector", generation="default") == 1
    assert sample("candlefire_app_watch_proven") == 1
    assert sample("candlefire_app_local_answers_bytes") > 0


def test_errors_are_counted_by_type(app_deployment):
    settings = app_deployment.settings
    with DelayProxy.for_dsn(settings.pg_dsn) as proxy:
        client = AppClientSettings(metrics="prometheus", connect_timeout_s=1, dead_peer_s=2)
        across = replace(settings, pg_dsn=proxy.proxied_dsn(settings.pg_dsn), app_client=client)
        with ServingCollection(across, SeededEmbedder()) as collection:
            collection.count()
            failed = sample("candlefire_app_errors_total", call="query",
                            error="BackendUnavailableError")  # fmt: skip
            proxy.cut("reset")
            with pytest.raises(BackendUnavailableError):
                collection.query(query_texts=["never asked before"], n_results=3)
    assert sample("candlefire_app_errors_total", call="query",
                  error="BackendUnavailableError") == failed + 1  # fmt: skip


CHILD = """
import json, sys, urllib.request
from candlefire_pipeline.app import open_collection
from candlefire_pipeline_tests.app.corpus import SeededEmbedder
collection = open_collection(embedder=SeededEmbedder())
collection.query(query_texts=["SOD1"], n_results=3)
served = None
if len(sys.argv) > 1:
    served = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
print(json.dumps({"imported": "prometheus_client" in sys.modules,
                  "served": served and "candlefire_app_calls_total" in served}))
"""


def _child(settings, *args: str, **env: str) -> dict:
    variables = {**os.environ, "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
                 "CANDLEFIRE_PG_DSN": settings.pg_dsn, "CANDLEFIRE_PG_TABLE": settings.pg_table,
                 "CANDLEFIRE_EMBED_MODEL": SeededEmbedder.model_id, **env}  # fmt: skip
    for name in ("CANDLEFIRE_APP_METRICS", "CANDLEFIRE_APP_METRICS_PORT"):
        if name not in env:
            variables.pop(name, None)
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=variables, text=True,
                          capture_output=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_metrics_are_off_by_default_and_served_on_their_port_when_asked(app_deployment):
    settings = app_deployment.settings
    assert _child(settings) == {"imported": False, "served": None}
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    on = _child(settings, str(port), CANDLEFIRE_APP_METRICS="prometheus",
                CANDLEFIRE_APP_METRICS_PORT=str(port))  # fmt: skip
    assert on == {"imported": True, "served": True}
