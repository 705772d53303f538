"""Parity over N stores: real Chroma, pgvector and Qdrant (local) against the exact oracle, one
of them deliberately broken; its column shows it, the divergence is traced, the gates do not move.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.common import ground_by_contains
from candlefire_pipeline.backends.pg.version import ServerVersions
from candlefire_pipeline.parity.gates import evaluate_gates
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import ParityQuery, load_queries
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.retrieval.retriever import TIMING_STAGES
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.defs.pipeline_harness import SlowReads
from candlefire_pipeline_tests.parity.demo_stores import (
    ABSTRACT_ONLY_PMID,
    EMBEDDER,
    retrievers,
    whole_graph_ef,
)
from candlefire_pipeline_tests.parity.test_gates import conformance

STORES = ("chroma", "pgvector", "qdrant")
#: Not every packaged query: each store's run costs a local-mode Qdrant scan per term.
QUERY_IDS = ("spg302-synapses", "mutation-q331k")


class LowerCasing:
    """A store whose substring search also matches the lower-cased terms (a case-folding bug)."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, attr):
        return getattr(self._store, attr)

    @staticmethod
    def _folded(variants):
        return list(dict.fromkeys([*variants, *(v.lower() for v in variants)]))

    def ground_terms(self, terms):
        return ground_by_contains(self, terms)

    def contains(self, variants, where=None) -> bool:
        return self._store.contains(self._folded(variants), where)

    def substring_candidates(self, variants, vectors, n, where=None):
        out = []
        for variant, vector in zip(variants, vectors, strict=True):
            folded = self._folded([variant])
            lists = self._store.substring_candidates(
                folded, np.stack([vector] * len(folded)), n, where
            )
            rows = {row["chunk_id"]: row for hits in lists for row in hits}.values()
            out.append(sorted(rows, key=lambda row: -row["similarity"])[:n])
        return out


class FailsAfter:
    """A store that answers `calls` retrieve-path reads, then is unreachable."""

    def __init__(self, store, calls: int) -> None:
        self._store, self._left = store, calls

    def __getattr__(self, attr):
        found = getattr(self._store, attr)
        if attr not in ("semantic_candidates", "substring_candidates", "contains"):
            return found

        def call(*args, **kwargs):
            self._left -= 1
            if self._left < 0:
                raise ConnectionError("qdrant: connection refused")
            return found(*args, **kwargs)

        return call


def load_stores(make_backend, rows) -> dict:
    efforts = {"chroma": {"ef_search": whole_graph_ef(rows)}}
    stores = {name: make_backend(name, **efforts.get(name, {})) for name in STORES}
    stores["memory"] = make_backend("memory")
    for store in stores.values():
        store.ensure_schema(EMBEDDER.model_id, EMBEDDER.dim)
        assert store.replace_papers(rows) == rows.num_rows
    return stores


def queries() -> list[ParityQuery]:
    packaged = [q for q in load_queries() if q.id in QUERY_IDS]
    assert len(packaged) == len(QUERY_IDS)
    return [
        *packaged,
        # the corpus writes "edaravone": no paper is cited (the grounding gate), the case
        # divergence shows in grounding and keyword search
        ParityQuery("case", "Edaravone in ALS", terms=("Edaravone",)),
        ParityQuery("other", "stress granules"),
        ParityQuery("tofersen", "tofersen lowers SOD1", ("tofersen",)),
    ]


def target_query(stores) -> ParityQuery:
    """A query whose text is the abstract-only paper's own chunk: rank 1 wherever it exists."""
    abstract = stores["chroma"].fetch(Filter(pmids=(ABSTRACT_ONLY_PMID,)))[0]["document"]
    return ParityQuery("target", abstract, terms=())  # no identifier tokens of its own


def without(report: ParityReport, store: str) -> ParityReport:
    """The same report as if `store` had never been part of the run."""
    data = report.to_dict()
    data["backends"] = [b for b in data["backends"] if b != store]
    data["chunk_counts"].pop(store)
    data["store_diffs"].pop(store, None)
    for table in ("latency_ms", "store_latency_ms", "stage_latency_ms", "ann_recall", "stores"):
        data["aggregates"][table].pop(store, None)
    for row in data["queries"]:
        for table in ("top", "latency_ms", "store_ms", "stage_ms", "vs_oracle", "ann_recall"):
            row[table].pop(store, None)
    data["store_divergences"].pop(store, None)
    return ParityReport.from_dict(data)


def judged(report: ParityReport) -> list[tuple]:
    """The gates as the flip sees them (with the ledger the run recorded as current)."""
    ledger = {s: {"b1": 1.0} for s in ("chroma", "pgvector")}
    report.ledger = {"read_at": report.created_at, "applied": ledger}
    report.store_diffs = {s: {"missing": 0, "orphaned": 0, "stale": 0} for s in report.stores()}
    report.conformance = {"pgvector": conformance()}  # the harness alone runs no conformance
    thresholds = ParityThresholds(min_corpus_chunks=10, min_queries_with_results=5)
    versions = ServerVersions("18.6", "0.8.6", "0.8.6")  # what run_report records and reads
    report.servers = {"pgvector": versions.to_dict()}
    return [dataclasses.astuple(g) for g in evaluate_gates(report, thresholds, ledger, versions)]


def break_store(kind: str, stores: dict) -> None:
    if kind == "dropped_chunk":
        assert stores["qdrant"].delete_papers([ABSTRACT_ONLY_PMID]) == 1
    elif kind == "lower_casing":
        stores["qdrant"] = LowerCasing(stores["qdrant"])
    elif kind == "slow":
        stores["qdrant"] = SlowReads(stores["qdrant"], delay_s=0.02)


@pytest.mark.parametrize("kind", ["dropped_chunk", "lower_casing", "slow"])
def test_a_broken_evaluated_store_shows_in_its_column_and_never_moves_the_gates(
    make_backend, demo_rows, kind
):
    stores = load_stores(make_backend, demo_rows)
    asked = [target_query(stores), *queries()]
    break_store(kind, stores)
    report = run_parity(retrievers(stores), asked)

    assert report.stores() == ["chroma", "pgvector", "qdrant"]
    assert report.evaluated_stores() == ["qdrant"] and report.role("qdrant") == "evaluated"
    # chroma vs pgvector agree whatever qdrant does (HNSW float rounding may swap two tied
    # PMIDs now and then: an "order" divergence, never another kind)
    assert {d.kind for d in report.divergences} <= {"order"}
    assert report.aggregates["mean_overlap"] == 1.0
    for store in ("chroma", "pgvector"):
        column = report.store_column(store)
        assert column["mean_overlap"] == 1.0, store
        assert {d.kind for d in report.store_divergences[store]} <= {"order"}, store
        assert column["grounding_agreement"] == column["keyword_agreement"] == 1.0
    qdrant = report.store_column("qdrant")
    found = [d for d in report.store_divergences["qdrant"] if d.kind != "order"]
    if kind == "dropped_chunk":
        assert report.chunk_counts["qdrant"] == report.chunk_counts["chroma"] - 1
        assert {(d.kind, d.field) for d in found} >= {
            ("missing_chunk", "inventory"), ("missing_chunk", "top15"),
        }  # fmt: skip
        assert {d.kind for d in found} == {"missing_chunk"}
        assert report.queries[0].vs_oracle["qdrant"]["overlap"] < 1.0
        assert qdrant["min_overlap"] < 1.0
    elif kind == "lower_casing":
        assert {d.kind for d in found} == {"case"} and qdrant["grounding_agreement"] < 1.0
        case_row = next(r for r in report.queries if r.query_id == "case")
        assert not case_row.vs_oracle["qdrant"]["grounding_equal"]
        assert {d.query_id for d in found} == {"case"}
        assert all(d.term == "Edaravone" for d in found)
    else:
        assert {d.kind for d in found} <= {"order"}
        slowest = max(report.latency(s, "p50", True) for s in ("chroma", "pgvector"))
        assert report.latency("qdrant", "p50", True) > slowest
        assert qdrant["store_latency_ms"]["p50"] == report.latency("qdrant", "p50", True)
    if kind != "slow":
        assert "qdrant" in report.diverging_stores()
    assert judged(report) == judged(without(report, "qdrant"))
    gates = {g[0]: g for g in judged(report)}
    assert not {name for name, g in gates.items() if not g[1]} - {"p95_ratio"}
    assert all("qdrant" not in g[4] for g in gates.values())


def test_every_store_gets_stage_timings_and_a_column_in_the_markdown(make_backend, demo_rows):
    stores = load_stores(make_backend, demo_rows)
    stores["qdrant"] = LowerCasing(stores["qdrant"])
    report = run_parity(retrievers(stores), queries())
    stages = report.aggregates["stage_latency_ms"]
    assert set(stages) == {"chroma", "pgvector", "qdrant", "memory"}
    assert all(set(s) == set(TIMING_STAGES) - {"total"} for s in stages.values())
    assert all(s["semantic"]["p95"] >= s["semantic"]["p50"] > 0 for s in stages.values())
    md = report_markdown(report)
    assert "| metric | chroma | pgvector | qdrant |" in md
    assert "| role | reference | candidate | evaluated |" in md
    assert "**qdrant diverges from the oracle**" in md and "does not block the flip" in md
    assert "## qdrant vs the oracle (" in md and "| case |" in md
    again = ParityReport.from_dict(report.to_dict())
    assert again == report and again.store_divergences["qdrant"][0].kind == "case"


def test_an_evaluated_store_failing_mid_run_is_left_out_with_the_reason(make_backend, demo_rows):
    stores = load_stores(make_backend, demo_rows)
    stores["qdrant"] = FailsAfter(stores["qdrant"], calls=12)
    report = run_parity(retrievers(stores), queries())
    assert report.backends == ["chroma", "pgvector", "memory"]
    assert report.unavailable == {"qdrant": "ConnectionError: qdrant: connection refused"}
    assert all("qdrant" not in row.latency_ms and "qdrant" not in row.top for row in report.queries)
    assert "qdrant" not in report.aggregates["stores"] and "qdrant" not in report.chunk_counts
    assert "**qdrant was not evaluated**: ConnectionError" in report_markdown(report)
    assert {d.kind for d in report.divergences} <= {"order"}


def test_a_gated_store_failing_fails_the_run(make_backend, demo_rows):
    stores = load_stores(make_backend, demo_rows)
    stores["pgvector"] = FailsAfter(stores["pgvector"], calls=3)
    with pytest.raises(ConnectionError):
        run_parity(retrievers(stores), queries())
