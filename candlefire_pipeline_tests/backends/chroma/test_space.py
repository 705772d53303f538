"""Attaching to an existing Chroma collection checks its distance space: L2 (Chroma's default)
or inner product is refused with what to do, never compared with cosine stores."""

from __future__ import annotations

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline.backends.chroma.space import CollectionSpaceError
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

NAME = "made_elsewhere"


def _client(path):
    return chromadb.PersistentClient(
        path=str(path), settings=ChromaSettings(anonymized_telemetry=False)
    )


def _create(path, how: str) -> None:
    """A collection as another tool would make it, holding one vector."""
    kwargs = {
        "default": {},  # no space given: Chroma's default, L2
        "legacy_l2": {"metadata": {"hnsw:space": "l2"}},
        "configured_ip": {"configuration": {"hnsw": {"space": "ip"}}},
        "legacy_cosine": {"metadata": {"hnsw:space": "cosine"}},
    }[how]
    collection = _client(path).create_collection(NAME, embedding_function=None, **kwargs)
    collection.add(ids=["x"], embeddings=[[1.0, 0.0, 0.0, 0.0]], documents=["made elsewhere"])


@pytest.mark.parametrize(
    "how, space, default_named",
    [("default", "l2", True), ("legacy_l2", "l2", True), ("configured_ip", "ip", False)],
)
def test_a_collection_in_another_space_is_refused_with_what_to_do(
    tmp_path, how, space, default_named
):
    _create(tmp_path, how)
    with pytest.raises(CollectionSpaceError) as refused:
        ChromaBackend(path=tmp_path, collection=NAME)
    message = str(refused.value)
    assert f"uses the {space!r} distance" in message and str(tmp_path) in message
    assert ("Chroma's default" in message) is default_named
    assert "CANDLEFIRE_CHROMA_COLLECTION" in message and "candlefire repair" in message
    # nothing was written or re-created: the collection is as it was
    (collection,) = _client(tmp_path).list_collections()
    assert collection.name == NAME and collection.count() == 1
    assert collection.configuration_json["hnsw"]["space"] == space


def test_a_cosine_collection_made_elsewhere_is_used(tmp_path):
    _create(tmp_path, "legacy_cosine")
    store = ChromaBackend(path=tmp_path, collection=NAME)
    try:
        store.replace_papers(make_rows([chunk("7")], unit_vectors(1, 4)))
        assert store.has_paper("7")
    finally:
        store.close()


def test_status_reports_an_l2_collection_instead_of_comparing_it(tmp_path, monkeypatch, capsys):
    settings = pipeline_env(monkeypatch, tmp_path / "data", "postgresql:///unused?host=/nowhere")
    monkeypatch.setenv("CANDLEFIRE_CHROMA_COLLECTION", NAME)
    _create(settings.chroma_path, "default")
    assert candlefire(["status"]) == 2
    out = capsys.readouterr().out
    assert "chroma: UNREACHABLE - CollectionSpaceError" in out
    assert "uses the 'l2' distance (Chroma's default" in out
