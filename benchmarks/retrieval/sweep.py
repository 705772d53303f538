"""Per-stage hnsw.ef_search sweep: recall@15 of the FINAL retrieve() list and stage latency.

One stage's ef_search varies while the other stays at the top of its range; the chosen value of
a stage is the smallest whose final-list recall@15 against the exact oracle is >= TARGET_RECALL
(plus a margin for held-out queries); the pair is then checked together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from benchmarks.common.figures import ms
from benchmarks.common.requests import answer_all, final_recall, list_recall
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.retrieval.retriever import Retriever

logger = logging.getLogger(__name__)

SEMANTIC_EFS = (40, 60, 100, 200, 400)
ENTITY_EFS = (10, 20, 40, 60, 100, 200, 400)
TARGET_RECALL = 0.99
#: A chosen value must clear the target by this much on the sweep's own queries.
MARGIN = 0.005


@dataclass(frozen=True)
class Point:
    ann: AnnParams
    final: float
    semantic_recall: float
    entity_recall: float
    semantic_s: list[float]
    entity_s: list[float]

    def row(self, varied: str) -> str:
        ef = self.ann.ef_search if varied == "semantic" else self.ann.ef_search_entities
        return (
            f"| {varied} | {ef} | {self.final:.4f} | {self.semantic_recall:.4f} |"
            f" {self.entity_recall:.4f} | {ms(self.semantic_s)} | {ms(self.entity_s)} |"
        )


def measure(dsn: str, table: str, ann: AnnParams, embedder, requests, oracle) -> Point:
    store = build_backend("pgvector", dsn, table=table, ann=ann)
    try:
        retriever = Retriever(store, embedder)
        answer_all(retriever, requests[:3])  # warm the connection and the index pages
        answers = answer_all(retriever, requests)
    finally:
        store.close()
    point = Point(
        ann=ann,
        final=final_recall(answers, oracle),
        semantic_recall=list_recall(answers, oracle, "semantic_pmids"),
        entity_recall=list_recall(answers, oracle, "entity_pmids"),
        semantic_s=[a.timings["semantic"] for a in answers],
        entity_s=[a.timings["entities"] for a in answers],
    )
    logger.info("sweep %s: final recall %.4f", ann, point.final)
    return point


def _smallest(points: list[Point], varied: str) -> int:
    key = "ef_search" if varied == "semantic" else "ef_search_entities"
    good = [p for p in points if p.final >= TARGET_RECALL + MARGIN]
    best = good or [max(points, key=lambda p: p.final)]
    return min(getattr(p.ann, key) for p in best)


def sweep(dsn: str, table: str, base: AnnParams, embedder, requests, oracle):
    """(markdown lines, chosen AnnParams, the chosen pair's Point)."""
    top = replace(base, ef_search=max(SEMANTIC_EFS), ef_search_entities=max(ENTITY_EFS))
    semantic = [
        measure(dsn, table, replace(top, ef_search=ef), embedder, requests, oracle)
        for ef in SEMANTIC_EFS
    ]
    entities = [
        measure(dsn, table, replace(top, ef_search_entities=ef), embedder, requests, oracle)
        for ef in ENTITY_EFS
    ]
    chosen = replace(
        base,
        ef_search=_smallest(semantic, "semantic"),
        ef_search_entities=_smallest(entities, "entities"),
    )
    pair = measure(dsn, table, chosen, embedder, requests, oracle)
    lines = [
        f"Per-stage `hnsw.ef_search` sweep on pgvector, {len(requests)} full `retrieve()` requests"
        " (query + 12 entity names + 3 terms, embeddings memoized so only the store is timed);"
        " recall@15 of the FINAL list (and of each stage's PMID list) against the same requests"
        " with exact ANN (memory backend; keyword and grounding are exact on pgvector already)."
        " One stage varies, the other stays at"
        f" {max(SEMANTIC_EFS)}. The keyword stage never walks the HNSW graph (trigram filter,"
        " then an exact sort), so it has no ef_search.",
        "",
        "| stage varied | ef_search | final recall@15 | semantic list recall | entity list recall"
        " | semantic p50 / p95 ms | entities p50 / p95 ms |",
        "|---|---|---|---|---|---|---|",
        *(p.row("semantic") for p in semantic),
        *(p.row("entities") for p in entities),
        "",
        f"Chosen (smallest ef_search with final recall@15 >= {TARGET_RECALL + MARGIN:.3f}):"
        f" semantic **{chosen.ef_search}**, entities **{chosen.ef_search_entities}**; together:"
        f" final recall@15 **{pair.final:.4f}** (goal >= {TARGET_RECALL}), semantic"
        f" {ms(pair.semantic_s)} ms, entities {ms(pair.entity_s)} ms.",
    ]
    return lines, chosen, pair
