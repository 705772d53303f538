"""Quality of two generations on a judged set: each ranks the judged queries exactly.

The judged papers are chunked with each generation's chunker and embedded with its model
(through the embedding cache, so a second comparison embeds nothing), held in an exact
in-memory index; with CANDLEFIRE_QUALITY_CORPUS=live the generation's own exact oracle over the
live corpus is used instead. Exact search isolates what a model or chunker changes; what the
ANN index loses is the separate ann_recall gate.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.corpus.chunking import chunker
from candlefire_pipeline.corpus.schema import store_rows
from candlefire_pipeline.embedding import EmbeddingCache, embed_texts, embedder_for
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.parity import build_oracle
from candlefire_pipeline.parity.quality import (
    JudgedQuery,
    QualityComparison,
    compare_rankings,
    load_judged_queries,
)
from candlefire_pipeline.settings import LIVE_CORPUS, REPO_ROOT, Settings

log = logging.getLogger(__name__)

#: Chunks fetched per query before keeping each paper's best one (6 chunks a paper at most).
DEPTH = 100


def load_corpus(path: Path) -> list[dict]:
    """The judged papers (papers.jsonl records)."""
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def judged_index(
    settings: Settings, generation: Generation, records: list[dict], cache: EmbeddingCache
) -> MemoryBackend:
    """The judged papers chunked and embedded as the generation does, in an exact index."""
    chunk = chunker(generation.identity.chunker)
    chunks = [c for record in records for c in chunk(record)]
    embedder = embedder_for(generation_settings(settings, generation), "bulk")
    vectors, embedded = embed_texts(embedder, cache, [c["document"] for c in chunks])
    log.info("%s: %d judged chunks, %d embedded now", generation.name, len(chunks), embedded)
    index = MemoryBackend()
    index.replace_papers(store_rows(chunks, vectors, "judged", embedder.model_id))
    return index


def rankings(backend: VectorBackend, embedder, queries: list[JudgedQuery]) -> list[list[str]]:
    """Each query's papers by exact cosine similarity (each paper at its best chunk)."""
    if not queries:
        return []
    vectors = embedder.embed([q.text for q in queries])
    return [
        list(dict.fromkeys(row["pmid"] for row in hits))
        for hits in backend.semantic_candidates(vectors, DEPTH)
    ]


def _index(settings, generation, records, cache) -> VectorBackend:
    view = generation_settings(settings, generation)
    if records is None:
        return build_oracle(view, embedder_for(view, "bulk"))
    return judged_index(settings, generation, records, cache)


def compare_quality(
    settings: Settings, reference: Generation, candidate: Generation
) -> QualityComparison:
    """nDCG@10 of both generations on the judged set, with the paired bootstrap interval."""
    corpus, queries_path = settings.generations.judged_set(REPO_ROOT)
    if not Path(queries_path).is_file():
        raise FileNotFoundError(
            f"judged queries {queries_path} not found (CANDLEFIRE_QUALITY_QUERIES)"
        )
    queries = load_judged_queries(queries_path)
    live = corpus == LIVE_CORPUS
    if not live and not Path(corpus).is_file():
        raise FileNotFoundError(f"judged corpus {corpus} not found (CANDLEFIRE_QUALITY_CORPUS)")
    records = None if live else load_corpus(Path(corpus))
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    ranked, ids = [], set()
    for generation in (reference, candidate):
        index = _index(settings, generation, records, cache)
        ids |= set(index.paper_hashes())
        query_embedder = embedder_for(generation_settings(settings, generation), "query")
        ranked.append(rankings(index, query_embedder, queries))
    label = f"{'live corpus' if live else corpus} x {queries_path}"
    samples = settings.generations.bootstrap_samples
    return compare_rankings(label, queries, ids, ranked[0], ranked[1], samples)
