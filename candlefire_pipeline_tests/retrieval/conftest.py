"""Fixtures of the retrieval tests: the ALS corpus loaded once per module into each backend."""

from __future__ import annotations

import uuid

import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline_tests.retrieval import als_corpus as als


@pytest.fixture(scope="module")
def als_store_factory(request, tmp_path_factory):
    """Returns make(name): a fresh store of that backend holding the ALS fixture corpus.

    Module-scoped (the read-only corpus is loaded once per backend and module), built like
    fixtures_backends.make_backend: a unique pg table on the session server, a fresh Chroma
    folder, or a new MemoryBackend; pg tables are dropped at teardown.
    """
    made = []

    def make(name: str):
        suffix = uuid.uuid4().hex[:12]
        if name == "pgvector":
            store = build_backend(name, request.getfixturevalue("pg_dsn"), table=f"als_{suffix}")
        elif name == "chroma":
            path = tmp_path_factory.mktemp("chroma") / suffix
            store = build_backend(name, path=path, collection=f"als_{suffix}")
        else:
            store = build_backend("memory")
        made.append(store)
        embed = als.embedder()
        store.ensure_schema(embed.model_id, embed.dim)
        store.replace_papers(als.store_rows(embed))
        return store

    yield make
    for store in made:
        if store.name == "pgvector":
            store.reset()
        store.close()
