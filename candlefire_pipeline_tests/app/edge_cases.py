"""The differential suite's hand-written calls: edge cases Chroma answers, calls it refuses, and
calls it answers that the serving collection does not serve (named in the error)."""

from __future__ import annotations

from candlefire_pipeline_tests.app.corpus import DIM, TWIN_TEXT, WORDS


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
