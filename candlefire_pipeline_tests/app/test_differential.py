"""The serving collection answers every call shape as the real Chroma collection does.

Both hold the same chunks and vectors (the project's Chroma store at an ef_search exact at this
size; the pgvector table written through the same replaces and deletes). Seeded random calls
(every operator, include combination, filters that match, match nothing or are refused) and
hand-written edge cases run on both; differential.py says what "the same" means.
"""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.app.filters import UnsupportedCallError
from candlefire_pipeline_tests.app.calls_random import CallMaker, call_app, call_chroma
from candlefire_pipeline_tests.app.corpus import DIM, TWIN_TEXT, WORDS, SeededEmbedder
from candlefire_pipeline_tests.app.differential import Tally, same_answer

SEEDED_CALLS = 600


def exact_distances(chroma, kwargs: dict):
    """oracle(q, ids): cosine distances of stored vectors to query q, computed here."""
    given = kwargs.get("query_embeddings")
    if given is None:
        texts = kwargs["query_texts"]
        queries = SeededEmbedder().embed([texts] if isinstance(texts, str) else texts)
    else:
        queries = np.atleast_2d(np.asarray(given, dtype=np.float64))
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)

    def oracle(q: int, ids: list[str]) -> list[float]:
        stored = chroma.get(ids=ids, include=["embeddings"]) if ids else {"ids": []}
        vectors = dict(zip(stored["ids"], stored.get("embeddings", []), strict=True))
        return [1.0 - float(np.dot(queries[q], vectors[i] / np.linalg.norm(vectors[i])))
                for i in ids]  # fmt: skip

    return oracle


def compare(chroma, served, kind: str, kwargs: dict, tally: Tally, where: str) -> None:
    """One call on both sides: both refuse it, or both answer it alike."""
    collection, embedder = served
    tally.calls += 1
    tally.kinds[kind] = tally.kinds.get(kind, 0) + 1
    try:
        expected, refused = call_chroma(chroma, SeededEmbedder(), kind, kwargs), None
    except Exception as exc:  # Chroma's refusal: ValueError, TypeError, its own errors
        expected, refused = None, exc
    embeds = len(embedder.calls)
    if refused is not None:
        with pytest.raises(ValueError):
            call_app(collection, kind, kwargs)
        tally.refused_alike += 1
        return
    got = call_app(collection, kind, kwargs)
    texts = kind == "query" and "query_texts" in kwargs and "query_embeddings" not in kwargs
    assert len(embedder.calls) - embeds == int(texts), f"{where}: one embedder call per query"
    tally.answered += 1
    if kind == "count":
        assert got == expected, where
        tally.nonempty += 1
        return
    oracle = exact_distances(chroma, kwargs) if kind == "query" else None
    same_answer(expected, got, kind, tally, where, oracle)


@pytest.fixture(scope="module")
def maker_inputs(chroma_collection):
    everything = chroma_collection.get(include=["documents", "metadatas"])
    return everything["documents"], everything["ids"], everything["metadatas"]


def test_seeded_calls_answer_as_chroma_does(chroma_collection, served, maker_inputs):
    documents, ids, metadatas = maker_inputs
    maker = CallMaker(20260611, documents, ids, metadatas, DIM)
    tally = Tally()
    for n in range(SEEDED_CALLS):
        kind, kwargs = maker.call(len(ids))
        compare(
            chroma_collection, served, kind, kwargs, tally, f"call {n}: {kind} {kwargs!r}"[:600]
        )
    assert tally.calls == SEEDED_CALLS
    assert tally.answered >= 0.8 * SEEDED_CALLS and tally.refused_alike >= 3
    assert tally.nonempty >= SEEDED_CALLS / 3  # the filters match, not only miss
    assert tally.kinds["get"] >= 150 and tally.kinds["query"] >= 250


def pmids(d, k: int) -> list[str]:
    return sorted({i.split("_")[0] for i in d.ids})[:k]


#: name -> (call, arguments from the deployment); every one answered by Chroma.
ANSWERED = {
    "count": ("count", lambda d: {}),
    "get-everything": ("get", lambda d: {}),
    "empty-get": ("get", lambda d: {"where": {"pmid": "no-such-paper"}}),
    "empty-query": ("query", lambda d: {"query_texts": ["ALS"], "where": {"pmid": "none"}}),
    "n-above-count": ("query", lambda d: {"query_texts": ["ALS motor"], "n_results": 10_000}),
    "contains-nothing": (
        "query",
        lambda d: {
            "query_texts": ["x"],
            "n_results": 3,
            "where_document": {"$contains": "zz-absent"},
        },
    ),
    "percent": ("get", lambda d: {"where_document": {"$contains": "100%"}}),
    "percent-alone": ("get", lambda d: {"where_document": {"$contains": "%"}, "include": []}),
    "underscore": ("get", lambda d: {"where_document": {"$contains": "p_v"}}),
    "underscore-alone": (
        "query",
        lambda d: {"query_texts": ["_"], "n_results": 50, "where_document": {"$contains": "_"}},
    ),
    "percent-underscore": ("get", lambda d: {"where_document": {"$contains": "%_"}}),
    "backslash": ("get", lambda d: {"where_document": {"$contains": "\\"}}),
    "backslash-word": ("get", lambda d: {"where_document": {"$contains": "back\\slash"}}),
    "quote": ("get", lambda d: {"where_document": {"$contains": "it's"}}),
    "double-quote": ("get", lambda d: {"where_document": {"$contains": '"quoted"'}}),
    "non-ascii": ("get", lambda d: {"where_document": {"$contains": "ünïcödé"}}),
    "cjk": (
        "query",
        lambda d: {
            "query_texts": ["日本語"],
            "n_results": 40,
            "where_document": {"$contains": "日本語"},
        },
    ),
    "case-sensitive": ("get", lambda d: {"where_document": {"$contains": "als"}}),
    "not-contains": ("get", lambda d: {"where_document": {"$not_contains": "ALS"}, "limit": 20}),
    "contains-or-and": (
        "get",
        lambda d: {
            "where_document": {
                "$or": [
                    {"$contains": "SPG-302"},
                    {"$and": [{"$contains": "SPG"}, {"$not_contains": "302"}]},
                ]
            }
        },
    ),
    "many-texts": ("query", lambda d: {"query_texts": list(WORDS[:30]), "n_results": 7}),
    "missing-year-ne": ("get", lambda d: {"where": {"year": {"$ne": 2000}}, "include": []}),
    "missing-year-nin": (
        "get",
        lambda d: {"where": {"year": {"$nin": [2000, 2001]}}, "include": ["metadatas"]},
    ),
    "bool-vs-int": ("get", lambda d: {"where": {"has_full_text": 1}}),
    "int-vs-bool": ("get", lambda d: {"where": {"chunk_index": True}}),
    "bool-ne-int": ("get", lambda d: {"where": {"has_full_text": {"$ne": 0}}, "include": []}),
    "float-on-int": ("get", lambda d: {"where": {"year": {"$gt": 2010.5}}}),
    "float-eq-int": ("get", lambda d: {"where": {"chunk_index": 1.0}}),
    "float-in-int": ("get", lambda d: {"where": {"chunk_index": {"$in": [1.0, 2.5]}}}),
    "float-truncated": ("get", lambda d: {"where": {"year": {"$lt": 2000.5}}, "include": []}),
    "float-negative": ("get", lambda d: {"where": {"chunk_index": {"$lte": -0.5}}}),
    "float-huge": ("get", lambda d: {"where": {"year": {"$lt": 1e30}}, "include": []}),
    "float-nin": ("get", lambda d: {"where": {"chunk_index": {"$nin": [0.7, 3.2]}}}),
    "str-on-int-ne": ("get", lambda d: {"where": {"year": {"$ne": "2000"}}, "include": []}),
    "str-ordered-num": ("get", lambda d: {"where": {"pmid": {"$gt": 1}}}),
    "unknown-key-eq": ("get", lambda d: {"where": {"nokey": "x"}}),
    "unknown-key-ne": ("get", lambda d: {"where": {"nokey": {"$ne": 1}}, "include": []}),
    "document-is-no-key": ("get", lambda d: {"where": {"document": {"$ne": "x"}}, "limit": 5}),
    "nested": (
        "query",
        lambda d: {
            "query_texts": ["riluzole"],
            "n_results": 20,
            "where": {
                "$or": [
                    {"$and": [{"chunk_index": 0}, {"has_full_text": True}]},
                    {"year": {"$lt": 1990}},
                ]
            },
        },
    ),
    "pmids-in": (
        "get",
        lambda d: {"where": {"pmid": {"$in": pmids(d, 8)}}, "include": ["documents", "metadatas"]},
    ),
    "get-paper": (
        "get",
        lambda d: {
            "where": {"$and": [{"pmid": {"$eq": pmids(d, 1)[0]}}, {"chunk_index": {"$eq": 0}}]}
        },
    ),
    "abstract-grounding": (
        "get",
        lambda d: {
            "where": {"chunk_index": {"$eq": 0}},
            "where_document": {"$contains": "SPG302"},
            "limit": 1,
            "include": ["metadatas"],
        },
    ),
    "corpus-grounding": (
        "query",
        lambda d: {
            "query_texts": ["SPG302"],
            "n_results": 1,
            "where_document": {"$contains": "SPG302"},
            "include": ["metadatas"],
        },
    ),
    "ids-order": ("get", lambda d: {"ids": list(reversed(d.ids[:9]))}),
    "ids-unknown": ("get", lambda d: {"ids": ["nope"]}),
    "ids-str": ("get", lambda d: {"ids": d.ids[3]}),
    "ids-and-where": ("get", lambda d: {"ids": d.ids[:40], "where": {"chunk_index": 0}}),
    "limit-zero": ("get", lambda d: {"limit": 0}),
    "offset-past": ("get", lambda d: {"offset": 10_000}),
    "limit-offset": ("get", lambda d: {"limit": 7, "offset": 11}),
    "offset-contains": (
        "get",
        lambda d: {"offset": 2, "limit": 3, "where_document": {"$contains": "ALS"}},
    ),
    "include-nothing": ("query", lambda d: {"query_texts": ["ALS"], "include": []}),
    "include-all": (
        "query",
        lambda d: {
            "query_texts": ["ALS", "SOD1"],
            "include": ["documents", "metadatas", "distances", "embeddings", "uris"],
        },
    ),
    "get-include-all": (
        "get",
        lambda d: {"limit": 9, "include": ["documents", "metadatas", "embeddings", "uris"]},
    ),
    "embeddings-empty": (
        "query",
        lambda d: {"query_texts": ["ALS"], "where": {"pmid": "no"}, "include": ["embeddings"]},
    ),
    "get-embeddings-empty": ("get", lambda d: {"ids": ["nope"], "include": ["embeddings"]}),
    "twins": ("query", lambda d: {"query_texts": [TWIN_TEXT], "n_results": 3}),
    "twins-all": ("query", lambda d: {"query_texts": [TWIN_TEXT], "n_results": 60}),
    "flat-vector": ("query", lambda d: {"query_embeddings": [0.1] * DIM, "n_results": 3}),
    "query-text-str": ("query", lambda d: {"query_texts": "motor neuron", "n_results": 4}),
    "both-query-inputs": (
        "query",
        lambda d: {"query_texts": ["x"], "n_results": 4, "query_embeddings": [[0.1] * DIM]},
    ),
}
#: Refused by Chroma, so refused here too.
REFUSED = {
    "where-empty": ("get", {"where": {}}),
    "where-two-keys": ("get", {"where": {"year": 2000, "pmid": "1"}}),
    "and-one": ("get", {"where": {"$and": [{"year": 2000}]}}),
    "in-empty": ("get", {"where": {"year": {"$in": []}}}),
    "in-mixed": ("get", {"where": {"year": {"$in": [2000, "2001"]}}}),
    "in-int-float": ("get", {"where": {"year": {"$in": [2000, 2001.0]}}}),
    "gt-str": ("get", {"where": {"year": {"$gt": "2000"}}}),
    "gt-bool": ("get", {"where": {"year": {"$gt": True}}}),
    "eq-list": ("get", {"where": {"year": {"$eq": [2000]}}}),
    "bare-list": ("get", {"where": {"year": [2000]}}),
    "none": ("get", {"where": {"year": None}}),
    "nan": ("get", {"where": {"year": {"$gt": float("nan")}}}),
    "two-operators": ("get", {"where": {"year": {"$gt": 1, "$lt": 3}}}),
    "n-zero": ("query", {"query_texts": ["x"], "n_results": 0}),
    "distances-in-get": ("get", {"include": ["distances"]}),
    "unknown-include": ("get", {"include": ["scores"]}),
    "ids-duplicate": ("get", {"ids": ["a", "a"]}),
    "ids-empty": ("get", {"ids": []}),
    "contains-empty": ("get", {"where_document": {"$contains": ""}}),
    "contains-number": ("get", {"where_document": {"$contains": 3}}),
    "document-and-one": ("get", {"where_document": {"$and": [{"$contains": "a"}]}}),
    "no-query-input": ("query", {}),
    "unequal-query-inputs": (
        "query",
        {"query_texts": ["x", "y"], "query_embeddings": [[0.1] * DIM]},
    ),
    "wrong-dim": ("query", {"query_embeddings": [[0.1] * 5]}),
    "empty-texts": ("query", {"query_texts": []}),
    "negative-limit": ("get", {"limit": -1}),
    "unknown-operator": ("get", {"where": {"year": {"$between": [1, 2]}}}),
    "unknown-logical": ("get", {"where": {"$not": [{"year": 1}, {"year": 2}]}}),
}


@pytest.mark.parametrize("name", ANSWERED)
def test_edge_cases_answer_as_chroma_does(chroma_collection, served, app_deployment, name):
    kind, arguments = ANSWERED[name]
    tally = Tally()
    compare(chroma_collection, served, kind, arguments(app_deployment), tally, name)
    assert tally.answered == 1


@pytest.mark.parametrize("name", REFUSED)
def test_what_chroma_refuses_is_refused(chroma_collection, served, name):
    kind, kwargs = REFUSED[name]
    tally = Tally()
    compare(chroma_collection, served, kind, kwargs, tally, name)
    assert tally.refused_alike == 1


#: Chroma answers these; the collection does not serve them and says so by name.
UNSERVED = {
    "regex": ("get", {"where_document": {"$regex": "A.S"}}, r"\$regex"),
    "not-regex": (
        "query",
        {"query_texts": ["x"], "where_document": {"$not_regex": "A"}},
        r"\$not_regex",
    ),
    "where-contains": ("get", {"where": {"entity_names": {"$contains": "SOD1"}}}, r"\$contains"),
    "where-not-contains": ("get", {"where": {"pmid": {"$not_contains": "1"}}}, r"\$not_contains"),
    "include-data": ("query", {"query_texts": ["x"], "include": ["data"]}, "'data'"),
    "query-ids": ("query", {"query_texts": ["x"], "ids": ["a"]}, "ids"),
    "query-uris": ("query", {"query_uris": ["file://x"]}, "query_uris"),
}


@pytest.mark.parametrize("name", UNSERVED)
def test_calls_outside_the_subset_are_refused_by_name(chroma_collection, served, name):
    kind, kwargs, named = UNSERVED[name]
    collection, _ = served
    with pytest.raises(UnsupportedCallError, match=named):
        call_app(collection, kind, kwargs)
    if name not in ("query-ids", "query-uris", "include-data"):
        call_chroma(chroma_collection, SeededEmbedder(), kind, kwargs)  # Chroma does answer
