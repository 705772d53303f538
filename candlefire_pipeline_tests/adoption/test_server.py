"""The app's collection served by a Chroma server (`chroma run` on its folder): read over HTTP by
collection name, classified as from the folder, its fingerprint stable while it is unchanged and
moved by a write, and a server that is down named in the gate's evidence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.adoption.reference import adoption_now
from candlefire_pipeline.operations.adoption.report import build_report
from candlefire_pipeline.operations.adoption.source import current_fingerprint
from candlefire_pipeline_tests.adoption import scenario
from candlefire_pipeline_tests.adoption.app_indexer import index_papers
from candlefire_pipeline_tests.adoption.test_report import EXPECTED, classes_of
from candlefire_pipeline_tests.reliability.helpers import ChromaServer


@pytest.fixture
def served(tmp_path):
    """The scenario's app folder behind `chroma run`; the settings read it by host and port."""
    deployment = scenario.deployment(tmp_path, pg_dsn="postgresql://unused")
    scenario.write_drops(deployment.settings)
    server = ChromaServer(deployment.app_folder, tmp_path / "chroma.log")
    server.start()
    app = replace(deployment.settings.app_collection, path=None, host=server.host,
                  port=server.port)  # fmt: skip
    try:
        yield replace(deployment.settings, app_collection=app), server
    finally:
        server.kill()


def test_a_served_collection_is_classified_as_its_folder_is(served):
    settings, server = served
    fingerprint = current_fingerprint(settings.app_collection)
    report, _ = build_report(settings, embedder_for(settings, "bulk"))
    assert {cid: row["class"] for cid, row in classes_of(settings, report).items()} == EXPECTED
    assert report.where.startswith(f"http://{server.host}:{server.port} collection 'als_papers'")
    assert report.fingerprint == fingerprint == current_fingerprint(settings.app_collection)
    assert not list((settings.adoption_dir / "snapshots").glob("*"))  # a server is only read
    assert adoption_now(settings)["report_fingerprint"] == fingerprint
    # the app's indexer adds a paper through the server: the fingerprint moves
    server.kill()
    index_papers(server.path, [scenario.corpus_v2()[-1] | {"pmid": "A10"}], scenario.app_embed)
    server.start()
    assert current_fingerprint(settings.app_collection) != fingerprint


def test_a_server_that_is_down_is_named_and_holds_the_gate(served):
    settings, server = served
    server.kill()
    now = adoption_now(settings)
    assert "error" in now and "cannot be read now" in now["error"]
