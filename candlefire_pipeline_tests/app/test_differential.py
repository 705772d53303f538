"""The serving collection answers every call shape as the real Chroma collection does.

Both hold the same chunks and vectors (the project's Chroma store at an ef_search exact at this
size; the pgvector table written through the same replaces and deletes). Seeded random calls
(every operator, include combination, filters that match, match nothing or are refused) and
hand-written edge cases (edge_cases.py) run on both; differential.py says what "the same" means.
"""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.app.filters import UnsupportedCallError
from candlefire_pipeline_tests.app.calls_random import CallMaker, call_app, call_chroma
from candlefire_pipeline_tests.app.corpus import DIM, SeededEmbedder
from candlefire_pipeline_tests.app.differential import Tally, same_answer
from candlefire_pipeline_tests.app.edge_cases import ANSWERED, REFUSED, UNSERVED

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
    made = len(embedder.calls) - embeds  # at most one call: texts embedded before are kept
    assert made <= int(texts), f"{where}: at most one embedder call per query"
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


@pytest.mark.parametrize("name", UNSERVED)
def test_calls_outside_the_subset_are_refused_by_name(chroma_collection, served, name):
    kind, kwargs, named = UNSERVED[name]
    collection, _ = served
    with pytest.raises(UnsupportedCallError, match=named):
        call_app(collection, kind, kwargs)
    if name not in ("query-ids", "query-uris", "include-data"):
        call_chroma(chroma_collection, SeededEmbedder(), kind, kwargs)  # Chroma does answer
