"""ParityReport serialization, files on disk, Markdown, and the gate arithmetic."""

from __future__ import annotations

import json

import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.operations.parity import record_evaluation
from candlefire_pipeline.parity.gates import evaluate_gates
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report.files import load_latest, write_report
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import Divergence, ParityReport, QueryRow
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

EMBEDDER = HashingEmbedder(dim=32)
DOCS = {
    "101": ["SPG302 restores synapses in TDP-43 mice", "rotarod latency improved"],
    "102": ["tofersen lowers SOD1 protein", "CMAP amplitude was preserved"],
    "103": ["riluzole and survival in a registry"],
}


LEDGER = {"chroma": {"b1": 1.0}, "pgvector": {"b1": 1.0}}


@pytest.fixture(scope="module")
def report() -> ParityReport:
    """Three exact stores; 'pgvector' lost chunk 101_s1, so the report has divergences."""
    chunks = [
        chunk(pmid, i, document=doc, has_full_text=len(docs) > 1)
        for pmid, docs in DOCS.items()
        for i, doc in enumerate(docs)
    ]
    vectors = EMBEDDER.embed([c["document"] for c in chunks])
    rows = make_rows(chunks, vectors, model_id=EMBEDDER.model_id)
    stores = {name: build_backend("memory") for name in ("chroma", "pgvector", "memory")}
    for store in stores.values():
        store.replace_papers(rows)
    stores["pgvector"].replace_papers(rows.filter([c["chunk_id"] != "101_s1" for c in chunks]))
    retrievers = {n: Retriever(s, EMBEDDER) for n, s in stores.items()}
    queries = [
        ParityQuery("rotarod", "rotarod latency", terms=("rotarod",)),
        ParityQuery("sod1 | pipe", "SOD1 lowering", ("tofersen",), ("SOD1",)),
    ]
    report = run_parity(retrievers, queries)
    report.ledger = {"read_at": report.created_at, "applied": LEDGER}
    thresholds = ParityThresholds(min_corpus_chunks=10, min_queries_with_results=5)
    record_evaluation(report, evaluate_gates(report, thresholds, LEDGER), thresholds)
    return report


def test_json_round_trip_keeps_every_field(report):
    again = ParityReport.from_dict(json.loads(report.to_json()))
    assert again == report
    assert isinstance(again.queries[0], QueryRow) and isinstance(again.divergences[0], Divergence)
    assert report.created_at.endswith("+00:00")  # UTC ISO 8601
    assert report.chunk_counts == {"chroma": 5, "pgvector": 4, "memory": 5}


def test_headline_is_flat_numbers(report):
    headline = report.headline()
    assert all(isinstance(v, float) for v in headline.values())
    wanted = {
        "mean_overlap", "min_overlap", "grounding_agreement", "keyword_agreement",
        "divergences", "p50_ms_chroma", "p95_ms_pgvector", "ann_recall_pgvector",
    }  # fmt: skip
    assert wanted <= set(headline)
    assert headline["divergences"] == len(report.divergences) > 0
    # 101_s1 is the only rotarod chunk: without it pgvector finds no keyword hit and no grounding
    # (6 checks: rotarod, and the second query's keyword terms tofersen + SOD1, twice each)
    assert headline["grounding_agreement"] == pytest.approx(1 - 1 / 6)
    assert headline["keyword_agreement"] == pytest.approx(1 / 2)


def test_markdown_has_headline_gate_query_and_divergence_tables(report):
    md = report_markdown(report)
    assert md.startswith(f"# Parity report {report.report_id}")
    assert "| metric | value |" in md and "| mean_overlap |" in md
    assert "| gate | result | value | threshold | detail |" in md
    assert "| chunk_counts_equal | FAIL |" in md and "| report_is_fresh | pass |" in md
    # the thresholds the gates used are in the markdown and the JSON, not defaults
    assert "min_corpus_chunks 10" in md and "min_queries_with_results 5" in md
    assert "| corpus_size | FAIL | 4 | >= 10 |" in md  # pgvector lost a chunk: 4 < 10
    assert json.loads(report.to_json())["thresholds"]["min_corpus_chunks"] == 10
    assert "| query | overlap | jaccard | rbo | grounding | keywords | chroma ms |" in md
    assert "| rotarod |" in md and "| sod1 \\| pipe |" in md  # a pipe in a cell is escaped
    assert "| - | missing_chunk | inventory | 101 | 101_s1 | chroma |" in md


def test_write_is_atomic_and_load_latest_picks_the_newest(report, tmp_path):
    assert load_latest(tmp_path) is None
    assert load_latest(tmp_path / "missing") is None
    json_path, md_path = write_report(report, tmp_path)
    assert json_path.name == f"parity-{report.report_id}.json" and md_path.suffix == ".md"
    assert md_path.read_text() == report_markdown(report)
    assert not list(tmp_path.glob("*.tmp"))
    newer = ParityReport.from_dict({**report.to_dict(), "report_id": "99999999T000000000000Z-x"})
    write_report(newer, tmp_path)
    assert load_latest(tmp_path) == newer


def test_a_report_without_an_evaluation_says_it_cannot_flip(report):
    bare = ParityReport.from_dict({**report.to_dict(), "gates": [], "thresholds": {}})
    assert "Not evaluated" in report_markdown(bare) and "| gate |" not in report_markdown(bare)


def test_a_report_from_before_the_gates_loads_with_unknown_ledger(report):
    old = {k: v for k, v in report.to_dict().items()
           if k not in ("started_at", "ledger", "store_diffs", "thresholds", "gates")}  # fmt: skip
    loaded = ParityReport.from_dict(old)
    assert (loaded.ledger, loaded.gates, loaded.started_at) == ({}, [], "")
