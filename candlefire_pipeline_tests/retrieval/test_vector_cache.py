"""The query-vector cache: a bounded LRU keyed by model identity, and how the retriever uses it
(entity names and keyword variants kept across requests, the query never; answers unchanged)."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.retrieval.vector_cache import QueryVectorCache
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, RetrievalSettings
from candlefire_pipeline_tests.retrieval import als_corpus as als

MODEL = ("model-a", 4)


def vec(x: float) -> np.ndarray:
    return np.array([x, 0, 0, 0], dtype=np.float32)


class CountingEmbedder:
    """The ALS corpus' hashing embedder, recording every batch it was asked to embed."""

    def __init__(self, model_id: str | None = None) -> None:
        self.inner = als.embedder()
        self.model_id = model_id or self.inner.model_id
        self.dim = self.inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def store():
    embedder = als.embedder()
    memory = build_backend("memory")
    memory.ensure_schema(embedder.model_id, embedder.dim)
    memory.replace_papers(als.store_rows(embedder))
    return memory


def test_lru_evicts_the_least_recently_used():
    cache = QueryVectorCache(2)
    cache.put_many(MODEL, {"a": vec(1), "b": vec(2)})
    cache.get_many(MODEL, ["a"])  # a is now the most recent
    cache.put_many(MODEL, {"c": vec(3)})
    assert set(cache.get_many(MODEL, ["a", "b", "c"])) == {"a", "c"}
    assert len(cache) == 2


def test_entries_are_keyed_by_model_identity():
    cache = QueryVectorCache(10)
    cache.put_many(MODEL, {"SOD1": vec(1)})
    assert cache.get_many(("model-b", 4), ["SOD1"]) == {}
    assert cache.get_many(("model-a", 8), ["SOD1"]) == {}
    assert cache.get_many(MODEL, ["SOD1"])["SOD1"][0] == 1


def test_cached_vectors_are_copies_and_read_only():
    cache = QueryVectorCache(10)
    source = vec(1)
    cache.put_many(MODEL, {"SOD1": source})
    source[0] = 9
    (kept,) = cache.get_many(MODEL, ["SOD1"]).values()
    assert kept[0] == 1
    with pytest.raises(ValueError):
        kept[0] = 5


def test_size_zero_keeps_nothing_and_counts_misses():
    cache = QueryVectorCache(0)
    cache.put_many(MODEL, {"SOD1": vec(1)})
    assert cache.get_many(MODEL, ["SOD1"]) == {}
    assert (len(cache), cache.hits, cache.misses, cache.hit_rate) == (0, 0, 1, 0.0)


def test_negative_size_is_refused():
    with pytest.raises(ValueError, match="max_entries"):
        QueryVectorCache(-1)


def test_concurrent_use_keeps_the_bound_and_every_vector_right():
    cache = QueryVectorCache(50)
    errors: list[str] = []

    def work(worker: int) -> None:
        for i in range(400):
            text = f"name-{(worker * 7 + i) % 120}"
            value = float(text.split("-")[1])
            cache.put_many(MODEL, {text: vec(value)})
            for name, got in cache.get_many(MODEL, [text, "name-3"]).items():
                if got[0] != float(name.split("-")[1]):
                    errors.append(name)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 50


def test_second_request_embeds_only_its_query_and_new_texts(store):
    embedder = CountingEmbedder()
    retriever = Retriever(store, embedder, als.SETTINGS)
    retriever.retrieve(als.QUERY, als.ENTITIES, als.TERMS)
    retriever.retrieve("SOD1 riluzole survival", als.ENTITIES, als.TERMS)
    first, second = embedder.calls
    assert als.QUERY in first and set(als.ENTITIES) <= set(first)
    assert second == ["SOD1 riluzole survival"]  # names and variants came from the cache
    # the query text itself is never kept: asking it again embeds it again
    retriever.retrieve(als.QUERY, als.ENTITIES, als.TERMS)
    assert embedder.calls[-1] == [als.QUERY]


def test_answers_are_the_same_with_and_without_the_cache(store):
    uncached = Retriever(store, CountingEmbedder(), replace(als.SETTINGS, query_vector_cache=0))
    cached = Retriever(store, CountingEmbedder(), als.SETTINGS)
    for query in (als.QUERY, "SOD1 riluzole survival", als.QUERY):
        a = uncached.retrieve(query, als.ENTITIES, als.TERMS)
        b = cached.retrieve(query, als.ENTITIES, als.TERMS)
        assert (a.pmids, a.entity_pmids, a.keyword_pmids) == (b.pmids, b.entity_pmids,
                                                               b.keyword_pmids)  # fmt: skip
        assert a.grounding == b.grounding
    assert cached.vector_cache.hits > 0
    assert len(uncached.vector_cache) == 0


def test_disabled_cache_embeds_every_text_every_time(store):
    embedder = CountingEmbedder()
    retriever = Retriever(store, embedder, replace(als.SETTINGS, query_vector_cache=0))
    retriever.retrieve(als.QUERY, als.ENTITIES, als.TERMS)
    retriever.retrieve(als.QUERY, als.ENTITIES, als.TERMS)
    assert embedder.calls[0] == embedder.calls[1]


def test_a_shared_cache_never_serves_another_models_vectors(store):
    shared = QueryVectorCache(100)
    first = CountingEmbedder()
    Retriever(store, first, als.SETTINGS, vector_cache=shared).search_by_entities(["SOD1"])
    other = CountingEmbedder(model_id=first.model_id + "@other")
    # the store's model contract would refuse another model: search the cache path directly
    other_retriever = Retriever(build_backend("memory"), other, als.SETTINGS, vector_cache=shared)
    other_retriever.embed_texts(["SOD1"], cacheable=["SOD1"])
    assert other.calls == [["SOD1"]]
    assert len(shared) == 2


def test_search_helpers_use_the_cache(store):
    embedder = CountingEmbedder()
    retriever = Retriever(store, embedder, als.SETTINGS)
    retriever.search_by_entities(["SOD1", "TDP-43"])
    retriever.search_by_entities(["SOD1", "TDP-43"])
    retriever.search_by_keyword(["SPG302"])
    retriever.search_by_keyword(["SPG302"])
    assert embedder.calls == [["SOD1", "TDP-43"], ["SPG302", "SPG 302", "SPG-302"]]


def test_settings_read_and_bound_the_cache_size(monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_QUERY_VECTOR_CACHE", "12")
    assert RetrievalSettings.from_env().query_vector_cache == 12
    monkeypatch.setenv("CANDLEFIRE_QUERY_VECTOR_CACHE", "-1")
    with pytest.raises(ValueError, match="CANDLEFIRE_QUERY_VECTOR_CACHE"):
        RetrievalSettings.from_env()
    assert RetrievalSettings().query_vector_cache == 4096


@pytest.mark.server  # loads the packaged model
def test_a_names_vector_does_not_depend_on_its_batch(onnx_dir):
    """The cache's premise on the product's query runtime (ONNX, length groups, padding): a name
    embedded alone or beside a long query gets the same vector within float32 rounding, far
    inside the retriever's 3e-6 tie margin."""
    model = load_embedder(DEFAULT_MODEL_ID, runtime="onnx", onnx_dir=onnx_dir)
    names = ["SOD1", "TDP-43", "C9orf72 repeat expansion"]
    query = "Riluzole extends survival in ALS patients with bulbar onset " * 8
    alone = model.embed(names)
    beside = model.embed([query, *names[::-1]])[1:][::-1]
    assert np.abs(alone - beside).max() < 1e-6


def test_real_model_answers_are_the_same_with_and_without_the_cache(onnx_dir):
    """On the product's query runtime a cached name vector was made beside another query than
    the one it now serves; every list, grounding and similarity is still the uncached one's."""
    model = load_embedder(DEFAULT_MODEL_ID, runtime="onnx", onnx_dir=onnx_dir)
    store = build_backend("memory")
    store.ensure_schema(model.model_id, model.dim)
    store.replace_papers(als.store_rows(model))
    uncached = Retriever(store, model, RetrievalSettings(query_vector_cache=0))
    cached = Retriever(store, model, RetrievalSettings())
    requests = [
        (als.QUERY, als.ENTITIES, als.TERMS),
        ("riluzole survival in bulbar onset ALS " * 4, als.ENTITIES[::-1], als.TERMS[:2]),
        ("C9orf72 repeat expansion in FTD", ["C9orf72", "SOD1"], ["ATXN2"]),
    ]
    for query, names, terms in requests:
        a = uncached.retrieve(query, names, terms)
        b = cached.retrieve(query, names, terms)
        assert (a.pmids, a.semantic_pmids, a.entity_pmids, a.keyword_pmids) == (
            b.pmids, b.semantic_pmids, b.entity_pmids, b.keyword_pmids)  # fmt: skip
        assert a.grounding == b.grounding
        assert [r["similarity"] for r in a.results] == pytest.approx(
            [r["similarity"] for r in b.results], abs=1e-6
        )
    assert cached.vector_cache.hits >= len(als.ENTITIES) + 3  # later requests were served
