"""The arguments of get and query, checked before any store is asked (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.app.calls import get_call, query_call
from candlefire_pipeline.app.filters import Contains, Field, UnsupportedCallError


def get(**kwargs):
    base = {"ids": None, "where": None, "limit": None, "offset": None, "where_document": None,
            "include": ["metadatas", "documents"]}  # fmt: skip
    return get_call(**{**base, **kwargs})


def query(**kwargs):
    base = {"query_embeddings": None, "query_texts": ["x"], "n_results": 10, "where": None,
            "where_document": None, "include": ["distances"]}  # fmt: skip
    return query_call(**{**base, **kwargs})


def test_a_get_keeps_the_filters_as_given_beside_their_trees():
    call = get(ids="a", where={"year": 2000}, where_document={"$contains": "x"}, limit=3)
    assert call.ids == ("a",) and call.limit == 3 and call.offset == 0
    assert call.where == Field("year", "$eq", (2000,)) and call.where_document == Contains("x")
    assert call.raw_where == {"year": 2000} and call.raw_where_document == {"$contains": "x"}


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"ids": []}, "non-empty list"),
        ({"ids": ["a", 1]}, "must be a str"),
        ({"ids": ["a", "b", "a"]}, "duplicates of a"),
        ({"limit": -1}, "limit must be an int >= 0"),
        ({"limit": True}, "limit must be an int >= 0"),
        ({"offset": 1.5}, "offset must be an int >= 0"),
        ({"include": "documents"}, "include must be a list"),
        ({"include": ["distances"]}, "cannot hold 'distances'"),
        ({"include": ["scores"]}, "got 'scores'"),
    ],
)
def test_a_bad_get_is_refused_naming_why(kwargs, named):
    with pytest.raises(ValueError, match=named):
        get(**kwargs)


@pytest.mark.parametrize(
    ("embeddings", "shape"),
    [
        ([0.1, 0.2, 0.3], (1, 3)),
        ([[0.1, 0.2], [0.3, 0.4]], (2, 2)),
        (np.ones(4), (1, 4)),
        (np.ones((3, 4), dtype=np.float64), (3, 4)),
        ([np.ones(2), np.zeros(2)], (2, 2)),
    ],
)
def test_query_embeddings_take_chromas_shapes(embeddings, shape):
    call = query(query_texts=None, query_embeddings=embeddings)
    assert call.vectors.shape == shape and call.vectors.dtype == np.float32
    assert call.texts is None and call.size == shape[0]


def test_texts_beside_embeddings_only_count_and_the_embeddings_are_queried():
    call = query(query_texts=["a", "b"], query_embeddings=[[1.0, 0.0], [0.0, 1.0]])
    assert call.texts is None and call.vectors.shape == (2, 2)
    with pytest.raises(ValueError, match="unequal lengths"):
        query(query_texts=["a"], query_embeddings=[[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"query_texts": None}, "query_embeddings or query_texts"),
        ({"query_texts": []}, "non-empty list"),
        ({"query_texts": ["a", None]}, "must be a str"),
        ({"query_texts": None, "query_embeddings": []}, "non-empty list or numpy array"),
        ({"query_texts": None, "query_embeddings": [[1.0], [1.0, 2.0]]}, "different lengths"),
        ({"query_texts": None, "query_embeddings": [[float("nan")]]}, "NaN or infinite"),
        ({"query_texts": None, "query_embeddings": [["a"]]}, "numbers"),
        ({"n_results": 0}, "n_results must be an int > 0"),
        ({"n_results": True}, "n_results must be an int > 0"),
    ],
)
def test_a_bad_query_is_refused_naming_why(kwargs, named):
    with pytest.raises(ValueError, match=named):
        query(**kwargs)


@pytest.mark.parametrize("argument", ["query_images", "query_uris", "ids"])
def test_query_arguments_outside_the_subset_are_named(argument):
    with pytest.raises(UnsupportedCallError, match=argument):
        query(**{argument: ["x"]})
    with pytest.raises(UnsupportedCallError, match="'data'"):
        query(include=["documents", "data"])
