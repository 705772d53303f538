"""The collection suites' shared deployment: one Chroma store and one pgvector table holding the
same corpus through the same writes (corpus.py), the real Chroma collection to compare with,
and the serving collection over each store."""

from __future__ import annotations

from dataclasses import replace

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.settings import AppClientSettings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder, deploy, with_ann

#: How the serving collection is set up: pgvector ranking every row, pgvector walking its HNSW
#: index, pgvector with answers copied into the process (the default across a network: the
#: change watch keeps them current), Chroma behind the read-only wrapper (the emergency lever
#: forces it).
MODES = ("pgvector-exact", "pgvector-hnsw", "pgvector-watched", "chroma")


@pytest.fixture(scope="session")
def app_deployment(tmp_path_factory, pg_dsn):
    deployment = deploy(tmp_path_factory.mktemp("app-collection"), pg_dsn)
    yield deployment
    store = open_backend("pgvector", deployment.settings)
    store.reset()
    store.close()


@pytest.fixture(scope="session")
def chroma_collection(app_deployment):
    """The real collection the project's Chroma store wrote (precomputed vectors)."""
    settings = app_deployment.settings
    client = chromadb.PersistentClient(
        str(settings.chroma_path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    collection = client.get_collection(settings.chroma_collection, embedding_function=None)
    count = collection.count()
    probe = collection.query(query_embeddings=SeededEmbedder().embed(["ALS motor", "x"]),
                             n_results=count, include=[])  # fmt: skip
    # the premise of every comparison: Chroma's walk reaches every chunk (corpus.py)
    assert [len(found) for found in probe["ids"]] == [count, count], "Chroma is not exact here"
    return collection


def mode_settings(settings, mode: str):
    if mode == "pgvector-hnsw":
        return with_ann(settings, full_scan_rows=0)
    if mode == "chroma":
        return replace(settings, serving_override="chroma")
    if mode == "pgvector-watched":
        return replace(settings, app_client=AppClientSettings())
    return settings


@pytest.fixture(params=MODES)
def served(request, app_deployment):
    """(the serving collection in one mode, its embedder)."""
    embedder = SeededEmbedder()
    settings = mode_settings(app_deployment.settings, request.param)
    with ServingCollection(settings, embedder) as collection:
        yield collection, embedder
