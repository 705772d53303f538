"""The app's own embedding function as the collection's query model (`embedding_function=`), on
the real stores: it answers as the project's query model does when it is the store's model,
and it is refused by name, before any answer, when it is not (pgvector, Chroma, a promoted
generation of another model, an empty store); count and get never call it."""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import replace

import numpy as np
import pytest

from candlefire_pipeline.app import open_collection
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.app.model_check import QueryModelMismatchError
from candlefire_pipeline.app.stores import open_store
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.serving.state import PROMOTED, ServingState, Target
from candlefire_pipeline_tests.app.conftest import mode_settings
from candlefire_pipeline_tests.app.corpus import DIM, SeededEmbedder, promote_directly
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows
from candlefire_pipeline_tests.generations.deployment import build, deploy, drop_tables

QUESTION = dict(query_texts=["SOD1 riluzole motor neuron"], n_results=8,
                include=["documents", "metadatas", "distances"])  # fmt: skip


class AppFunction:
    """A chromadb-style embedding function as an app writes one (records what it embedded);
    its vectors are scaled, not unit: the collection normalizes them."""

    def __init__(self, embedder, label: str) -> None:
        self.embedder, self.label, self.calls = embedder, label, []

    def __call__(self, input):
        self.calls.append(("documents", list(input)))
        return [2.5 * v for v in self.embedder.embed(list(input))]

    def embed_query(self, input):
        self.calls.append(("query", list(input)))
        return [2.5 * v for v in self.embedder.embed(list(input))]

    def name(self) -> str:
        return self.label

    def get_config(self) -> dict:
        return {"model_name": self.embedder.model_id}


def seeded(dim: int = DIM) -> AppFunction:
    """The store's own model (SeededEmbedder, corpus.py) as the app's function."""
    return AppFunction(SeededEmbedder(dim), "seeded_test")


def hashing(dim: int = DIM) -> AppFunction:
    """Another model of the same dimension (feature hashing)."""
    return AppFunction(HashingEmbedder(dim, model_id=f"hashing-v1:{dim}"), "hashing_test")


class Opener:
    """open_store, with every query a store answered counted: a refusal must come before any
    (a store embeds inside query(), only when it asks its server, so a refused call enters it)."""

    def __init__(self) -> None:
        self.queried = 0

    def __call__(self, target, view, embedder):
        store = open_store(target, view, embedder)
        real = store.query

        def query(call, vectors):
            answer = real(call, vectors)
            self.queried += 1
            return answer

        store.query = query
        return store


MODES = ("pgvector-exact", "chroma")


@pytest.mark.parametrize("mode", MODES)
def test_the_stores_own_model_answers_as_the_project_embedder_does(app_deployment, mode):
    settings = mode_settings(app_deployment.settings, mode)
    function = seeded()
    with ServingCollection(settings, SeededEmbedder()) as ours:
        expected = ours.query(**QUESTION)
    with open_collection(settings, embedding_function=function) as collection:
        answer = collection.query(**QUESTION)
        assert collection.target.backend == mode.split("-")[0]
        first = collection.get(limit=3, include=["documents"])["documents"]
    assert answer["ids"] == expected["ids"] and answer["documents"] == expected["documents"]
    np.testing.assert_allclose(answer["distances"][0], expected["distances"][0], atol=1e-6)
    # the check: the store's first 3 documents in insertion order, once; then the query text
    assert function.calls == [("documents", first), ("query", QUESTION["query_texts"])]


@pytest.mark.parametrize("mode", MODES)
def test_candle_fires_calls_use_the_function_only_to_embed_query_texts(app_deployment, mode):
    settings = mode_settings(app_deployment.settings, mode)
    function = seeded()
    with open_collection(settings, embedding_function=function) as collection:
        total = collection.count()
        got = collection.get(where={"chunk_index": 0}, limit=5, include=["metadatas"])
        collection.get(ids=got["ids"], include=["documents", "embeddings"])
        vector = SeededEmbedder().embed(["motor neuron"])
        collection.query(query_embeddings=vector, n_results=3, include=["distances"])
        assert total > 0 and got["ids"] and function.calls == []
        collection.query(query_texts=["motor neuron"], n_results=3)
        collection.query(query_texts=["motor neuron", "edaravone"], n_results=3)
    # checked once; a text embedded before comes from the collection's vector cache
    assert [kind for kind, _ in function.calls] == ["documents", "query", "query"]
    assert function.calls[2][1] == ["edaravone"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("function", "found"), [
    (hashing(), r"cosines \[.*\] with its first 3 stored chunks \(at least 0\.999"),
    (seeded(64), "64-dim vectors where the store's are 32-dim"),
])  # fmt: skip
def test_another_model_is_refused_by_name_before_any_answer(app_deployment, mode, function,
                                                            found):  # fmt: skip
    settings = mode_settings(app_deployment.settings, mode)
    opener = Opener()
    with ServingCollection(settings, opener=opener, embedding_function=function) as collection:
        for _ in range(2):  # refused again on the next query: nothing was let through
            with pytest.raises(QueryModelMismatchError) as refused:
                collection.query(**QUESTION)
            message = str(refused.value)
            assert (
                "'seeded-test' (dim 32)" in message and collection.target.backend in message.lower()
            )
            assert f"function {function.label} (model_name '{function.embedder.model_id}')" in (
                message
            )
            assert refused.match(found)
        assert opener.queried == 0  # no store answered a query
        assert collection.count() > 0  # count and get need no function
    assert isinstance(refused.value, BackendUnavailableError)


def test_an_embedder_and_a_function_together_are_refused(app_deployment):
    with pytest.raises(ValueError, match="an embedder or an embedding_function, not both"):
        open_collection(app_deployment.settings, SeededEmbedder(), embedding_function=seeded())


def test_the_projects_own_embedder_is_still_checked_by_its_model_id(app_deployment):
    with ServingCollection(app_deployment.settings, HashingEmbedder(DIM)) as collection:
        with pytest.raises(BackendUnavailableError, match="holds vectors of 'seeded-test'"):
            collection.query(**QUESTION)


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory, app_deployment):
    """A pgvector table of the seeded model whose every chunk was deleted."""
    root = tmp_path_factory.mktemp("empty-store")
    settings = replace(app_deployment.settings, data_dir=root, drops_dir=root / "drops",
                       pg_table=f"empty_{uuid.uuid4().hex[:8]}")  # fmt: skip
    rows = make_rows([chunk("1", document="only chunk")], SeededEmbedder().embed(["only chunk"]),
                     model_id=SeededEmbedder.model_id, dim=DIM)  # fmt: skip
    with opened_backend("pgvector", settings) as store:
        store.replace_papers(rows)
        store.delete_papers(["1"])
    promote_directly(settings)
    yield settings
    with opened_backend("pgvector", settings) as store:
        store.reset()


def test_an_empty_store_checks_the_dimension_only_and_says_so(empty_store, caplog):
    caplog.set_level(logging.WARNING, logger="candlefire_pipeline.app.model_check")
    with open_collection(empty_store, embedding_function=seeded()) as collection:
        assert collection.count() == 0
        assert collection.query(**QUESTION)["ids"] == [[]]
        assert collection.query(query_texts=["another"], n_results=1)["ids"] == [[]]
    said = [r.getMessage() for r in caplog.records if "has no chunk to check" in r.getMessage()]
    assert len(said) == 1 and "only the dimension" in said[0], said  # said once
    with open_collection(empty_store, embedding_function=seeded(64)) as collection:
        with pytest.raises(QueryModelMismatchError, match="gives 64-dim vectors. Only the dim"):
            collection.query(**QUESTION)


@pytest.fixture(scope="module")
def generations(tmp_path_factory, pg_dsn):
    """The demo drops in the default generation (hashing-v1, 64-dim) and in a generation
    "dim48" of another model (hashing-v1:48)."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")
    settings = deploy(monkeypatch, tmp_path_factory.mktemp("ef-generations"), pg_dsn)
    build(settings, create_generation(settings, "dim48", "hashing-v1:48"))
    yield settings
    drop_tables(settings)
    monkeypatch.undo()


def serve(settings, generation: str) -> None:
    """pgvector of `generation` promoted (a new file: the follower sees every change)."""
    state = ServingState(PROMOTED, report_id="r-test", generation=generation)
    written = settings.serving_file.with_name(f".{uuid.uuid4().hex}")
    written.write_text(state.to_json())
    os.replace(written, settings.serving_file)


def test_a_generation_of_another_model_refuses_the_function_by_name(generations):
    function = AppFunction(HashingEmbedder(64), "hashing_test")  # the default generation's model
    serve(generations, DEFAULT_NAME)
    with open_collection(generations, embedding_function=function) as collection:
        first = collection.query(**QUESTION)
        assert first["ids"][0] and collection.target == Target("pgvector")
        serve(generations, "dim48")
        with pytest.raises(QueryModelMismatchError) as refused:
            collection.query(**QUESTION)
        assert collection.target == Target("pgvector", "dim48")
        assert refused.match(r"pgvector table '\w+' holds vectors of 'hashing-v1:48' \(dim 48\)")
        assert refused.match("64-dim vectors where the store's are 48-dim")
        serve(generations, DEFAULT_NAME)  # a rollback: the default's verdict still holds
        assert collection.query(**QUESTION)["ids"] == first["ids"]
    assert [kind for kind, _ in function.calls] == ["documents", "query", "documents"]
