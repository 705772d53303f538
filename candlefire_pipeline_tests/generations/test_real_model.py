"""The packaged MiniLM on real parts: fp32 -> its int8 ONNX runtime as a new generation (built
beside the serving one, judged on quality, then promoted and rolled back), and a vector ->
halfvec layout generation (built from the cache alone, judged on overlap). SciFact abstracts
are the live corpus; SciFact's own training claims, with their relevance judgments, are the
judged set (CANDLEFIRE_QUALITY_CORPUS=live: relevance is judged against what the stores hold)."""

from __future__ import annotations

import json

import pytest

from candlefire_pipeline.embedding import EmbeddingCache, embedder_for
from candlefire_pipeline.generations.batches import embed_batch
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.generations.view import reports_dir
from candlefire_pipeline.operations.generations.compare import run_comparison
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.commands import Order, rollback
from candlefire_pipeline.operations.serving.generation import promote_generation
from candlefire_pipeline.operations.serving.machine import CHANGED
from candlefire_pipeline.settings import DEFAULT_MODEL_ID
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import (
    build,
    drop_tables,
    failing_gates,
    ingest,
)
from candlefire_pipeline_tests.latency import ignore_machine_latency

CLAIMS, PAPERS = 60, 200


def scifact_drop(shared_data, root):
    """A drop of PAPERS SciFact abstracts holding the relevant papers of the first CLAIMS claims
    that have any; those claims as the judged queries."""
    corpus = {}
    with (shared_data / "scifact/corpus.jsonl").open() as fh:
        for line in fh:
            record = json.loads(line)
            corpus[record["pmid"]] = record
    claims, chosen = [], {}
    with (shared_data / "scifact/queries_train.jsonl").open() as fh:
        for line in fh:
            claim = json.loads(line)
            relevant = [str(r) for r in claim["relevant"] if str(r) in corpus]
            if relevant and len(claims) < CLAIMS:
                claims.append(claim)
                chosen.update({pmid: corpus[pmid] for pmid in relevant})
    for pmid, record in corpus.items():
        if len(chosen) >= PAPERS:
            break
        chosen.setdefault(pmid, record)
    queries = root / "claims.jsonl"
    queries.write_text("".join(json.dumps(c) + "\n" for c in claims))
    return list(chosen.values()), queries


@pytest.fixture
def minilm_deployment(tmp_path, monkeypatch, pg_dsn, shared_data):
    papers, queries = scifact_drop(shared_data, tmp_path)
    monkeypatch.setenv("CANDLEFIRE_QUALITY_CORPUS", "live")
    # the committed parity queries are about ALS: on SciFact only those without a focus term
    # return papers (candle-fire's rule), about a dozen; the gate still needs some
    monkeypatch.setenv("CANDLEFIRE_PARITY_MIN_QUERIES", "5")
    monkeypatch.setenv("CANDLEFIRE_QUALITY_QUERIES", str(queries))
    ignore_machine_latency(monkeypatch)  # a property of this shared machine, not of the index
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model=DEFAULT_MODEL_ID)
    drop = settings.drops_dir / "0001-scifact.jsonl"
    drop.write_text("".join(json.dumps(p) + "\n" for p in papers))
    ingest(settings, drop.name, [])
    yield settings
    drop_tables(settings)


def test_minilm_int8_and_halfvec_generations_are_built_judged_and_int8_served(minilm_deployment):
    settings = minilm_deployment
    int8 = create_generation(settings, "int8", DEFAULT_MODEL_ID, runtime="onnx-int8")
    assert int8.identity.embedding_id == f"{DEFAULT_MODEL_ID}@onnx-int8"
    assert int8.identity.dim == 384
    build(settings, int8)
    report = run_comparison(settings, "int8")
    report.write(reports_dir(settings, int8))  # as `candlefire generation compare` does
    assert report.kind == "quality" and "@onnx-int8" in report.why
    quality = report.quality
    assert quality["judged"] == CLAIMS
    # int8 vectors differ slightly (mean cosine 0.993 on SciFact): nDCG moves little
    assert abs(quality["delta"]) < 0.05 and quality["reference_ndcg"] > 0.5
    assert quality["ci_low"] <= quality["delta"] <= quality["ci_high"]
    gates = {g["name"]: g for g in report.gates}
    assert not failing_gates(report.gates), failing_gates(report.gates)
    assert gates["grounding_agreement"]["value"] == 1.0

    half = create_generation(
        settings, "half", DEFAULT_MODEL_ID, runtime="onnx", layout=IndexLayout("halfvec")
    )
    view_embedder = embedder_for(settings, "bulk")
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    summary = embed_batch(settings, half, "0001-scifact.jsonl", view_embedder, cache)
    assert summary.embedded == 0  # the serving generation's model embedded every text already
    build(settings, half)
    report = run_comparison(settings, "half")
    assert report.kind == "overlap" and report.quality is None
    assert not failing_gates(report.gates), failing_gates(report.gates)

    promote_and_roll_back_int8(settings, claim=json.loads(
        settings.generations.quality_queries.read_text().splitlines()[0])["text"])  # fmt: skip


def promote_and_roll_back_int8(settings, claim: str) -> None:
    """int8 serves on its comparison (still fresh: neither ledger changed since), the reader
    embeds queries with int8, and a rollback returns to Chroma."""
    with ServingReader(settings) as reader:
        chroma_pmids = reader.retriever().retrieve(claim, [], []).pmids
        outcome = promote_generation(
            settings, "int8", Order("promote", "smaller and faster", "tester")
        )
        assert outcome.decision.outcome == CHANGED, outcome.decision.message
        retriever = reader.retriever()
        assert (reader.backend_name, reader.generation) == ("pgvector", "int8")
        assert retriever.embedder.model_id == f"{DEFAULT_MODEL_ID}@onnx-int8"
        int8_pmids = retriever.retrieve(claim, [], []).pmids
        assert int8_pmids and set(int8_pmids[:3]) & set(chroma_pmids[:3])
        state = rollback(settings, Order("rollback", "drill", "tester")).state
        assert (str(state.target), state.pinned) == ("chroma/default", True)
        assert reader.retriever().retrieve(claim, [], []).pmids == chroma_pmids
