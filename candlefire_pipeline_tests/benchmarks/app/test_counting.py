"""The app benchmark's wrappers count what each arm asks of the embedder and the collection."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.app.counting import CountingCalls, CountingEmbedder, EmbeddingCollection
from candlefire_pipeline.embedding import HashingEmbedder


class Failing:
    model_id, dim = "failing", 4

    def embed(self, texts):
        raise RuntimeError("model down")


def test_the_embedder_counts_calls_texts_and_seconds_also_of_a_failed_call():
    counting = CountingEmbedder(HashingEmbedder(dim=8))
    vectors = counting.embed(["a", "b", "c"])
    counting.embed(["d"])
    assert vectors.shape == (3, 8) and (counting.calls, counting.texts) == (2, 4)
    assert (counting.model_id, counting.dim) == ("hashing-v1", 8) and counting.seconds > 0
    failing = CountingEmbedder(Failing())
    with pytest.raises(RuntimeError, match="model down"):
        failing.embed(["x", "y"])
    assert (failing.calls, failing.texts) == (1, 2)


class FakeCollection:
    def count(self):
        return 3

    def get(self, **kwargs):
        return {"ids": ["1"]}

    def query(self, query_embeddings, **kwargs):
        return {"ids": [["1"] for _ in query_embeddings], "kwargs": kwargs}


def test_each_call_is_counted_by_name_and_query_texts_are_embedded_in_one_call():
    embedder = CountingEmbedder(HashingEmbedder(dim=8))
    calls = CountingCalls(EmbeddingCollection(FakeCollection(), embedder))
    assert calls.count() == 3 and calls.get(ids=["1"]) == {"ids": ["1"]}
    answer = calls.query(query_texts=["a", "b"], n_results=2)
    calls.query(query_texts=["c"], n_results=1)
    assert answer["ids"] == [["1"], ["1"]] and answer["kwargs"] == {"n_results": 2}
    assert calls.calls == {"count": 1, "get": 1, "query": 2} and calls.total == 4
    assert (embedder.calls, embedder.texts) == (2, 3)
    assert isinstance(embedder.inner.embed(["a"]), np.ndarray)
