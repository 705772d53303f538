"""A real deployment for generation tests, through the core stages (no Dagster run needed).

`deploy(monkeypatch, root, pg_dsn)`: the demo drops ingested into every store of the default
generation (hashing-v1, 64-dim), a small judged set configured. `build(settings, generation)`:
what the generation's assets do for every ingested drop. `ingest(settings, key, generations)`:
one more drop through the default generation and the given ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.embedding import EmbeddingCache, embedder_for, write_embeddings
from candlefire_pipeline.generations.batches import embed_batch, ingested_keys, prepare_chunks
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env

#: Judged papers: each holds two words no other paper has; its query names them.
JUDGED_PAPERS = 60
WORDS = [f"{a}{b}" for a in ("zor", "vel", "qua", "mib", "tas", "rup") for b in "aeiouy"]


def write_judged_set(root: Path) -> tuple[Path, Path]:
    corpus, queries = root / "judged_papers.jsonl", root / "judged_queries.jsonl"
    papers, lines = [], []
    for i in range(JUDGED_PAPERS):
        own = f"{WORDS[i % len(WORDS)]}{i} {WORDS[(i * 7) % len(WORDS)]}x{i}"
        abstract = f"We report {own} in a cohort of patients with ALS."
        papers.append({"pmid": f"j{i}", "title": f"Study {i} of {own}", "abstract": abstract})
        lines.append({"qid": str(i), "text": f"what is known of {own}", "relevant": [f"j{i}"]})
    corpus.write_text("".join(json.dumps(p) + "\n" for p in papers))
    queries.write_text("".join(json.dumps(q) + "\n" for q in lines))
    return corpus, queries


def deploy(monkeypatch, root: Path, pg_dsn: str) -> Settings:
    corpus, queries = write_judged_set(root)
    monkeypatch.setenv("CANDLEFIRE_QUALITY_CORPUS", str(corpus))
    monkeypatch.setenv("CANDLEFIRE_QUALITY_QUERIES", str(queries))
    settings = pipeline_env(monkeypatch, root / "data", pg_dsn, model="hashing-v1")
    for drop in write_demo_drops(settings.drops_dir):
        ingest(settings, drop.name, [])
    return settings


def _apply_everywhere(settings: Settings, view: Settings, keys: list[str], embedder) -> None:
    for store in settings.stores:
        backend = open_backend(store, view)
        try:
            for key in keys:
                apply_batch(backend, view.batches_dir, key, embedder.model_id, embedder.dim)
        finally:
            backend.close()


def ingest(settings: Settings, key: str, generations) -> None:
    """One drop: papers, chunks, the default's embeddings and stores, then each generation's."""
    batch = settings.batch_dir(key)
    write_papers(settings.drops_dir / key, batch)
    write_chunks(batch)
    embedder = embedder_for(settings, "bulk")
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    write_embeddings(batch / "chunks.parquet", batch / "embeddings.parquet", embedder, cache)
    _apply_everywhere(settings, settings, [key], embedder)
    for generation in generations:
        build(settings, generation, [key])


def build(settings: Settings, generation, keys: list[str] | None = None) -> None:
    """The generation's chunks, embeddings and stores for the drops (default: every one)."""
    keys = ingested_keys(settings) if keys is None else keys
    view = generation_settings(settings, generation)
    embedder = embedder_for(view, "bulk")
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    for key in keys:
        prepare_chunks(settings, generation, key)
        embed_batch(settings, generation, key, embedder, cache)
    _apply_everywhere(settings, view, keys, embedder)


def drop_tables(settings: Settings) -> None:
    """The generations' pgvector tables (the test server outlives the test)."""
    registry = stored_registry(settings)
    for generation in registry.generations if registry else ():
        backend = open_backend("pgvector", generation_settings(settings, generation))
        backend.reset()
        backend.close()


#: The one gate measured in wall-clock time: on a shared test machine it says how busy the
#: machine was, so tests assert it was measured (value, detail), not that it passed.
LATENCY_GATE = "p95_ratio"


def failing_gates(gates) -> dict[str, str]:
    """name -> detail of every failed gate but the latency one (GateResult or its dict)."""
    rows = [g if isinstance(g, dict) else g.to_dict() for g in gates]
    for row in rows:
        if row["name"] == LATENCY_GATE:
            assert row["value"] > 0 and "p95" in row["detail"], row
    return {r["name"]: r["detail"] for r in rows if not r["passed"] and r["name"] != LATENCY_GATE}
