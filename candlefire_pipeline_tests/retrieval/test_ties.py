"""Templated titles tie exactly; every store must still rank them exactly like the oracle."""

from __future__ import annotations

import itertools

import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval import Retriever
from candlefire_pipeline.retrieval.ties import tie_groups
from candlefire_pipeline.stores import BACKEND_NAMES
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

DRUGS = ("riluzole", "edaravone", "tofersen", "SPG302", "masitinib", "ibudilast")
GENES = ("SOD1", "TDP-43", "C9orf72", "FUS")
TEMPLATES = (
    "A cohort study of {drug} in {gene}-associated ALS",
    "Effects of {drug} on {gene}-related pathology in mice",
    "A registry analysis of {drug} in {gene} carriers",
    "Long-term {drug} exposure and survival in {gene} ALS",
)
# 96 papers: few enough that every store's graph search sees them all (exact answers), so any
# difference from the oracle can only come from how ties are ordered and cut.
QUERIES = [
    (f"{drug} in {gene} ALS", [gene, drug], [drug])
    for drug, gene in itertools.product(DRUGS[:3], GENES[:3])
]


def _corpus(embedder: HashingEmbedder):
    titles = [t.format(drug=d, gene=g) for t, d, g in itertools.product(TEMPLATES, DRUGS, GENES)]
    chunks = [
        chunk(f"9{i:04d}", document=title, title=title, year=2000 + i % 20)
        for i, title in enumerate(titles)
    ]
    return make_rows(chunks, embedder.embed(titles), model_id=embedder.model_id)


@pytest.fixture
def tied_stores(make_backend):
    embedder = HashingEmbedder(dim=64)
    rows = _corpus(embedder)
    stores = {"memory": build_backend("memory")}
    stores.update({name: make_backend(name) for name in BACKEND_NAMES if name != "memory"})
    for store in stores.values():
        store.ensure_schema(embedder.model_id, embedder.dim)
        store.replace_papers(rows)
    yield embedder, stores
    stores["memory"].close()


def test_the_corpus_ties_and_stores_disagree_in_the_last_bits(tied_stores):
    """The premise: without a tie rule these stores would order the same chunks differently."""
    embedder, stores = tied_stores
    vector = embedder.embed([QUERIES[0][0]])
    oracle = {r["chunk_id"]: r["similarity"] for r in stores["memory"].semantic_candidates(
        vector, 96)[0]}  # fmt: skip
    assert max(len(group) for group in tie_groups(oracle_rows(oracle))) >= 4
    noisy = 0
    for store in stores.values():
        for row in store.semantic_candidates(vector, 96)[0]:
            noisy += row["similarity"] != oracle[row["chunk_id"]]
    assert noisy > 0


def oracle_rows(similarities: dict[str, float]) -> list[dict]:
    return [{"pmid": k, "chunk_id": k, "similarity": v} for k, v in similarities.items()]


def test_every_store_ranks_tied_papers_exactly_like_the_oracle(tied_stores):
    embedder, stores = tied_stores
    retrievers = {name: Retriever(store, embedder) for name, store in stores.items()}
    for query, names, terms in QUERIES:
        expected = retrievers["memory"].retrieve(query, names, terms)
        for name, retriever in retrievers.items():
            got = retriever.retrieve(query, names, terms)
            where = f"{name}: {query!r}"
            assert got.semantic_pmids == expected.semantic_pmids, where
            assert got.entity_pmids == expected.entity_pmids, where
            assert got.keyword_pmids == expected.keyword_pmids, where
            assert got.pmids == expected.pmids, where
            scores = [round(r["final_score"], 9) for r in got.results]
            assert scores == [round(r["final_score"], 9) for r in expected.results], where
