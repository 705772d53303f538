"""Chroma-only behaviour: batching, persisted model contract, no embedding-function config."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.chroma import backend as chroma_module
from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 4


def test_writes_in_batches_of_the_client_limit(make_backend, monkeypatch):
    store = make_backend("chroma")
    calls: list[int] = []
    real_upsert = store._collection.upsert

    def upsert(**kwargs):
        calls.append(len(kwargs["ids"]))
        return real_upsert(**kwargs)

    monkeypatch.setattr(store._client, "get_max_batch_size", lambda: 7)
    monkeypatch.setattr(store._collection, "upsert", upsert)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(20)], unit_vectors(20, DIM)))
    assert calls == [7, 7, 6]
    assert store.count() == 20


def test_model_contract_and_data_survive_reopen(tmp_path):
    store = ChromaBackend(path=tmp_path / "c", collection="reopen_me")
    store.replace_papers(make_rows([chunk("1", year=None)], unit_vectors(1, DIM)))
    store.close()
    again = ChromaBackend(path=tmp_path / "c", collection="reopen_me")
    try:
        assert again.stored_model() == ("test", DIM)
        assert again.count() == 1 and again.has_paper("1")
        config = again._collection.configuration_json
        assert config["hnsw"]["space"] == "cosine"
        assert "/" not in str(config.get("embedding_function"))  # no model path persisted
    finally:
        again.close()


def test_needs_exactly_one_location(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        ChromaBackend()
    with pytest.raises(ValueError, match="exactly one"):
        ChromaBackend(path=tmp_path, host="localhost")


def test_short_term_behaviour_is_recorded():
    # The behaviour suite asserts short terms match on chroma; this pins the documented flag.
    assert chroma_module.SHORT_TERMS_MATCH is True


def test_a_replace_that_loses_the_year_drops_it(make_backend):
    """Chroma's upsert merges metadata: a key left out would keep the replaced chunk's value."""
    store = make_backend("chroma")
    store.replace_papers(make_rows([chunk("1", year=2001)], unit_vectors(1, DIM)))
    store.replace_papers(make_rows([chunk("1", year=None, paper_hash="p2")], unit_vectors(1, DIM)))
    (metadata,) = store._collection.get(ids=["1"], include=["metadatas"])["metadatas"]
    assert "year" not in metadata and metadata["paper_hash"] == "p2"
    store.replace_papers(make_rows([chunk("1", year=1999)], unit_vectors(1, DIM)))
    assert store._collection.get(ids=["1"], include=["metadatas"])["metadatas"][0]["year"] == 1999
