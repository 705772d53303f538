"""ParityReport serialization, files on disk, Markdown, and the gate arithmetic."""

from __future__ import annotations

import json

import pytest

from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report import (
    Divergence,
    ParityReport,
    QueryRow,
    evaluate_gates,
    load_latest,
)
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

EMBEDDER = HashingEmbedder(dim=32)
DOCS = {
    "101": ["SPG302 restores synapses in TDP-43 mice", "rotarod latency improved"],
    "102": ["tofersen lowers SOD1 protein", "CMAP amplitude was preserved"],
    "103": ["riluzole and survival in a registry"],
}


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
    stores = {name: MemoryBackend() for name in ("chroma", "pgvector", "memory")}
    for store in stores.values():
        store.replace_papers(rows)
    stores["pgvector"].replace_papers(rows.filter([c["chunk_id"] != "101_s1" for c in chunks]))
    retrievers = {n: Retriever(s, EMBEDDER) for n, s in stores.items()}
    queries = [
        ParityQuery("rotarod", "rotarod latency", terms=("rotarod",)),
        ParityQuery("sod1 | pipe", "SOD1 lowering", ("tofersen",), ("SOD1",)),
    ]
    return run_parity(retrievers, queries)


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
    assert headline["grounding_agreement"] == pytest.approx(1 - 1 / 4)
    assert headline["keyword_agreement"] == pytest.approx(1 / 2)


def test_markdown_has_headline_gate_query_and_divergence_tables(report):
    md = report.to_markdown()
    assert md.startswith(f"# Parity report {report.report_id}")
    assert "| metric | value |" in md and "| mean_overlap |" in md
    assert "| gate | result | value | threshold | detail |" in md
    assert "| chunk_counts_equal | FAIL |" in md
    assert "| query | overlap | jaccard | rbo | grounding | keywords | chroma ms |" in md
    assert "| rotarod |" in md and "| sod1 \\| pipe |" in md  # a pipe in a cell is escaped
    assert "| - | missing_chunk | inventory | 101 | 101_s1 | chroma |" in md


def test_write_is_atomic_and_load_latest_picks_the_newest(report, tmp_path):
    assert load_latest(tmp_path) is None
    assert load_latest(tmp_path / "missing") is None
    json_path, md_path = report.write(tmp_path)
    assert json_path.name == f"parity-{report.report_id}.json" and md_path.suffix == ".md"
    assert md_path.read_text() == report.to_markdown()
    assert not list(tmp_path.glob("*.tmp"))
    newer = ParityReport.from_dict({**report.to_dict(), "report_id": "99999999T000000000000Z-x"})
    newer.write(tmp_path)
    assert load_latest(tmp_path) == newer


def synthetic(p95_ref=10.0, p95_cand=12.0, grounding=1.0, overlap=0.95, counts=(5, 5), differing=0):
    latency = {"chroma": {"p50": 1.0, "p95": p95_ref}, "pgvector": {"p50": 1.0, "p95": p95_cand}}
    whole = {name: {"p50": 99.0, "p95": 99.0} for name in latency}  # the gate must not use it
    return ParityReport(
        report_id="r", created_at="2025-01-01T00:00:00+00:00", reference="chroma",
        candidate="pgvector", oracle=None, backends=["chroma", "pgvector"], queries=[],
        aggregates={
            "mean_overlap": overlap, "min_overlap": overlap, "grounding_agreement": grounding,
            "grounding_checks": 10, "keyword_agreement": 1.0, "latency_ms": whole,
            "store_latency_ms": latency,
        },
        divergences=[], chunk_counts=dict(zip(["chroma", "pgvector"], counts, strict=True)),
        inventory={"differing": differing},
    )  # fmt: skip


@pytest.mark.parametrize(
    "report_kwargs, gate, passed, value",
    [
        ({}, "grounding_agreement", True, 1.0),
        ({"grounding": 0.99}, "grounding_agreement", False, 0.99),
        ({"overlap": 0.9}, "mean_overlap", True, 0.9),
        ({"overlap": 0.89}, "mean_overlap", False, 0.89),
        ({"p95_ref": 10.0, "p95_cand": 15.0}, "p95_ratio", True, 1.5),
        ({"p95_ref": 10.0, "p95_cand": 15.5}, "p95_ratio", False, 1.55),
        ({"p95_ref": 0.0, "p95_cand": 0.0}, "p95_ratio", True, 1.0),
        ({"counts": (5, 4)}, "chunk_counts_equal", False, 1.0),
        # equal counts but one chunk each side the other lacks: still not the same store
        ({"counts": (5, 5), "differing": 2}, "chunk_counts_equal", False, 2.0),
        ({}, "chunk_counts_equal", True, 0.0),
    ],
)
def test_evaluate_gates(report_kwargs, gate, passed, value):
    gates = {g.name: g for g in evaluate_gates(synthetic(**report_kwargs), ParityThresholds())}
    assert sorted(gates) == [
        "chunk_counts_equal", "grounding_agreement", "mean_overlap", "p95_ratio",
    ]  # fmt: skip
    assert (gates[gate].passed, gates[gate].value) == (passed, pytest.approx(value))


def test_gates_use_the_given_thresholds():
    strict = ParityThresholds(grounding_agreement=1.0, mean_overlap=0.99, p95_ratio=1.1)
    gates = {g.name: g for g in evaluate_gates(synthetic(), strict)}
    assert not gates["mean_overlap"].passed and gates["mean_overlap"].threshold == 0.99
    assert not gates["p95_ratio"].passed and gates["p95_ratio"].threshold == 1.1
