"""Every store answers candle-fire's recorded queries exactly as candle-fire's own code did.

The corpus goes through the pipeline's papers and chunks stages into each store (with the
vectors candle-fire's collection stored); all 110 recorded queries run through retrieve(); every
stage list, the variants, keyword terms, grounding and the RRF top 20 are checked. Tie swaps
(rows within 1e-5) are counted; lists where candle-fire's own Chroma graph missed neighbours are
proven so from the recording's vectors (conformance_lists.explain_misses); anything else fails.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from candlefire_pipeline.parity.conformance.check import run_conformance
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import RetrievalSettings

#: Every store kind and pgvector index layout; Chroma with an effort at which its graph is exact
#: on this corpus (its default, 100 like candle-fire's, misses neighbours: see the last test).
STORES = {
    "memory": {},
    "pgvector": {},
    "pgvector-halfvec": {},
    "pgvector-binary": {},
    "chroma": {"ef_search": 1000},
    "qdrant": {},
}
#: qdrant-client's local mode evaluates every payload filter in Python over every point (0.2 s
#: per substring or grounding call on this corpus, ~3 min for all queries): Qdrant answers every
#: fourth recorded query, the other stores all of them.
SAMPLED = {"qdrant": 4}


@pytest.fixture(params=list(STORES))
def loaded(request, make_backend, conformance_rows):
    store = make_backend(request.param, **STORES[request.param])
    store.replace_papers(conformance_rows)
    return request.param, store


def test_every_store_conforms_stage_by_stage(
    loaded, conformance, conformance_embedder, conformance_exact
):
    name, store = loaded
    queries = conformance.queries[:: SAMPLED.get(name, 1)]
    result = run_conformance(name, Retriever(store, conformance_embedder), conformance,
                             conformance_exact, queries)  # fmt: skip
    print(f"conformance {name}: {result.summary()}")
    assert len(conformance.queries) == 110 and result.queries == len(queries)
    assert result.failures == [], result.failures[:5]
    # nothing passes vacuously: every check ran on every query, and candle-fire's own Chroma
    # graph did miss neighbours in its recording (proven, counted, never hidden)
    assert all(sum(tally.values()) == len(queries) for tally in result.counts.values())
    assert result.counts["search_by_entities"]["reference_miss"] > 0
    assert result.counts["search_by_keyword"]["identical"] == len(queries)


@pytest.mark.parametrize(
    ("changed", "stage"),
    [
        ({"semantic_n": 20}, "search"),  # the project's pool before this rewrite
        ({"keyword_hits": 20}, "search_by_keyword"),
        ({"entity_cap": 3}, "search_by_entities"),
        ({"rrf_k": 60}, "rrf_top20"),
    ],
)
def test_a_retriever_that_differs_from_candle_fire_fails(
    make_backend, conformance, conformance_rows, conformance_embedder, conformance_exact,
    changed, stage,
):  # fmt: skip
    store = make_backend("memory")
    store.replace_papers(conformance_rows)
    settings = replace(RetrievalSettings(), **changed)
    queries = conformance.queries[:25]
    result = run_conformance("memory", Retriever(store, conformance_embedder, settings),
                             conformance, conformance_exact, queries)  # fmt: skip
    assert result.counts[stage]["differs"] > 0
    assert any(f["check"] == stage for f in result.failures)


def test_chromas_default_effort_misses_neighbours_and_says_so(
    make_backend, conformance, conformance_rows, conformance_embedder, conformance_exact
):
    """At Chroma's default ef_search (100) its graph misses neighbours on this corpus: those
    lists are not candle-fire's, and each is traced to the store's own index (store_miss)."""
    store = make_backend("chroma", ef_search=100)
    store.replace_papers(conformance_rows)
    result = run_conformance("chroma", Retriever(store, conformance_embedder), conformance,
                             conformance_exact)  # fmt: skip
    found = result.verdicts()
    assert found["store_miss"] > 0 and not result.passed
    stages = ("search", "search_by_entities", "search_by_keyword")
    assert all(result.counts[s]["differs"] == 0 for s in stages)  # semantics: all candle-fire's
