"""run_parity on real pgvector, Chroma and the memory oracle loaded with the same demo papers."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.common import ground_by_contains
from candlefire_pipeline.parity.gates import evaluate_gates
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import ParityQuery, load_queries
from candlefire_pipeline.parity.report.model import DIVERGENCE_KINDS
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.parity.demo_stores import (
    ABSTRACT_ONLY_PMID,
    EMBEDDER,
    retrievers,
    whole_graph_ef,
)


def load_stores(make_backend, rows, pg_mode: str = "like", chroma_ef: int = 100) -> dict:
    """pgvector (pg_mode), Chroma (always case-sensitive) and the oracle (pg_mode), same rows."""
    stores = {
        "chroma": make_backend("chroma", ef_search=chroma_ef),
        "pgvector": make_backend("pgvector", substring_mode=pg_mode),
        "memory": make_backend("memory", substring_mode=pg_mode),
    }
    for store in stores.values():
        store.ensure_schema(EMBEDDER.model_id, EMBEDDER.dim)
        assert store.replace_papers(rows) == rows.num_rows
    return stores


def gates(report) -> dict:
    return {g.name: g for g in evaluate_gates(report, ParityThresholds(), ledger_now=None)}


def test_identical_stores_agree_everywhere(make_backend, demo_rows):
    queries = load_queries()
    stores = load_stores(make_backend, demo_rows, chroma_ef=whole_graph_ef(demo_rows))
    report = run_parity(retrievers(stores), queries)
    assert report.divergences == []
    assert report.chunk_counts == dict.fromkeys(("chroma", "pgvector", "memory"), len(demo_rows))
    agg = report.aggregates
    assert (agg["mean_overlap"], agg["min_overlap"], agg["mean_rbo"]) == (1.0, 1.0, 1.0)
    assert agg["grounding_agreement"] == 1.0 and agg["keyword_agreement"] == 1.0
    # every keyword term (entity names, then the query's terms) is grounded twice
    assert agg["grounding_checks"] == 2 * sum(len(set(q.keyword_terms)) for q in queries)
    # HNSW stays approximate at 233 chunks: the graph differs from build to build (Chroma inserts
    # from threads, pgvector draws random levels) and one CI run in many missed a neighbour
    # (never reproduced in 10 quiet rebuilds of each). One miss in the whole set reads 1 - 1/900.
    assert min(agg["ann_recall"].values()) >= 0.99, agg["ann_recall"]
    assert sorted(agg["ann_recall"]) == ["chroma", "pgvector"]
    found = gates(report)
    for name in ("grounding_agreement", "mean_overlap", "chunk_counts_equal"):
        assert found[name].passed, found[name]
    # the p95 gate compares real timings, so only its arithmetic is checked here
    ratio = report.latency("pgvector", "p95", True) / report.latency("chroma", "p95", True)
    assert found["p95_ratio"].value == pytest.approx(ratio)
    assert found["p95_ratio"].passed == (ratio <= 1.5)
    assert [row.query_id for row in report.queries] == [q.id for q in queries]


def test_mutation_query_reaches_q_331k_only_through_the_hyphen_variant(
    make_backend, demo_rows, demo_chunks
):
    docs = [c["document"] for c in demo_chunks]
    assert any("Q-331K" in d for d in docs) and not any("Q331K" in d for d in docs)
    [query] = [q for q in load_queries() if q.id == "mutation-q331k"]
    papers = {c["pmid"] for c in demo_chunks if "Q-331K" in c["document"]}
    for name, retriever in retrievers(load_stores(make_backend, demo_rows)).items():
        assert retriever.grounding(query.terms) == {"Q331K": {"corpus": True, "abstract": True}}
        hits = retriever.search_by_keyword(query.terms, n=50)
        assert {row["pmid"] for row in hits} == papers, name


def test_chunk_deleted_behind_pgvectors_back_is_a_missing_chunk(make_backend, demo_rows):
    stores = load_stores(make_backend, demo_rows)
    pg = stores["pgvector"]
    with pg.conn.transaction():
        pg.conn.execute(
            sql.SQL("DELETE FROM {t} WHERE chunk_id = %s").format(t=pg.names.ident()),
            [ABSTRACT_ONLY_PMID],
        )
    abstract = stores["chroma"].fetch(Filter(pmids=(ABSTRACT_ONLY_PMID,)))[0]["document"]
    # its own text: rank 1 wherever the chunk exists (no identifier tokens: a semantic query)
    query = ParityQuery("target", abstract, terms=())
    report = run_parity(retrievers(stores), [query, ParityQuery("other", "stress granules")])
    inventory = [d for d in report.divergences if d.field == "inventory"]
    assert [(d.kind, d.chunk_id, d.present_in) for d in inventory] == [
        ("missing_chunk", ABSTRACT_ONLY_PMID, "chroma")
    ]
    top = [d for d in report.divergences if d.query_id == "target" and d.pmid == ABSTRACT_ONLY_PMID]
    assert [(d.kind, d.field, d.chunk_id) for d in top] == [
        ("missing_chunk", "top15", ABSTRACT_ONLY_PMID)
    ]
    assert ABSTRACT_ONLY_PMID in report.queries[0].top["chroma"]
    assert ABSTRACT_ONLY_PMID not in report.queries[0].top["pgvector"]
    assert report.chunk_counts["pgvector"] == report.chunk_counts["chroma"] - 1
    failed = gates(report)["chunk_counts_equal"]
    assert not failed.passed and failed.value == 2.0  # one chunk fewer + one id missing


class TrigramFloor:
    """A store whose substring search ignores variants under 3 characters, the way Chroma's
    trigram-indexed $contains is documented to (chromadb 1.5.9 does not: see backends/chroma/)."""

    def __init__(self, store) -> None:
        self._store, self.name = store, store.name

    def __getattr__(self, attr):
        return getattr(self._store, attr)

    def ground_terms(self, terms):
        return ground_by_contains(self, terms)

    def contains(self, variants, where=None) -> bool:
        kept = [v for v in variants if len(v) >= 3]
        return bool(kept) and self._store.contains(kept, where)

    def substring_candidates(self, variants, vectors, n, where=None):
        found = self._store.substring_candidates(variants, vectors, n, where)
        return [hits if len(v) >= 3 else [] for v, hits in zip(variants, found, strict=True)]


QUERIES = [
    ParityQuery("short", "serum NF concentrations", terms=("NF",)),
    ParityQuery("case", "Edaravone in ALS", terms=("Edaravone",)),
    ParityQuery("plain", "SPG302 in ALS", terms=("SPG302",)),
]


def divergences_by_query(report) -> dict[str, list]:
    found: dict[str, list] = {}
    for d in report.divergences:
        found.setdefault(d.query_id, []).append(d)
    return found


def assert_term_divergence(found: list, kind: str) -> None:
    """Both grounding booleans, keyword hits and the top-15 differ, all traced to `kind`."""
    assert sorted(d.detail.split(":")[0] for d in found if d.field == "grounding") == [
        "abstract", "corpus",
    ]  # fmt: skip
    assert {d.kind for d in found} == {kind}
    assert all(d.present_in == "pgvector" for d in found if d.field == "grounding")
    keyword = [d for d in found if d.field == "keyword"]
    assert keyword and all(d.pmid and d.term for d in keyword)


def test_case_variant_term_diverges_on_chroma_against_ilike(make_backend, demo_rows, demo_chunks):
    # the premise, from the chunks themselves: NF occurs verbatim, edaravone only in lower case
    docs = [c["document"] for c in demo_chunks]
    assert any("NF" in d for d in docs) and any("edaravone" in d for d in docs)
    assert not any("Edaravone" in d for d in docs)
    report = run_parity(retrievers(load_stores(make_backend, demo_rows, pg_mode="ilike")), QUERIES)
    found = divergences_by_query(report)
    assert_term_divergence(found.pop("case"), "case")
    # chromadb 1.5.9 matches 2-character terms like LIKE does: no trigram floor to diverge on
    assert found == {}
    rows = {row.query_id: row for row in report.queries}
    assert not rows["case"].grounding_equal and not rows["case"].keyword_equal
    assert rows["short"].grounding_equal and rows["short"].keyword_equal
    assert report.aggregates["grounding_agreement"] == pytest.approx(1 - 2 / 6)
    assert not gates(report)["grounding_agreement"].passed
    assert set(report.aggregates["divergences_by_kind"]) <= set(DIVERGENCE_KINDS)


def test_short_term_divergence_under_a_trigram_floor(make_backend, demo_rows):
    stores = load_stores(make_backend, demo_rows)  # like mode: the case query agrees
    stores["chroma"] = TrigramFloor(stores["chroma"])
    report = run_parity(retrievers(stores), QUERIES)
    found = divergences_by_query(report)
    assert_term_divergence(found.pop("short"), "short_term")
    assert found == {}
    assert report.aggregates["grounding_agreement"] == pytest.approx(1 - 2 / 6)


def test_latency_is_recorded_per_backend_and_query(make_backend, demo_rows):
    report = run_parity(
        retrievers(load_stores(make_backend, demo_rows)),
        [ParityQuery("a", "riluzole"), ParityQuery("b", "tofersen", terms=("tofersen",))],
        oracle=None,
    )
    assert report.oracle is None and report.aggregates["ann_recall"] == {}
    for row in report.queries:
        assert set(row.latency_ms) == set(row.store_ms) == {"chroma", "pgvector", "memory"}
        assert all(0 < row.store_ms[b] < row.latency_ms[b] for b in row.latency_ms)
    for backend in report.backends:
        values = [row.latency_ms[backend] for row in report.queries]
        assert report.latency(backend, "p50") == pytest.approx(float(np.median(values)))


def test_run_parity_rejects_unknown_backends_and_duplicate_ids(make_backend, demo_rows):
    found = retrievers({"memory": make_backend("memory"), "chroma": make_backend("chroma")})
    with pytest.raises(ValueError, match="no retriever for 'pgvector'"):
        run_parity(found, [ParityQuery("a", "x")])
    with pytest.raises(ValueError, match="duplicate query ids"):
        run_parity(found, [ParityQuery("a", "x"), ParityQuery("a", "y")], candidate="memory")
