"""What the 12 entity names cost beside the one semantic query, request by request.

Two definitions, both measured on the product's Retriever:
- with embeddings (what a request pays): `search_by_entities(names)` (the names' vectors from the
  query-vector cache or one embed call, then the 12-name search) vs `search(query text)` (the
  query's embedding, then the semantic search);
- store only (the former docs/BENCHMARKS.md figure): the entity stage vs the semantic stage inside
  `retrieve()`, embeddings excluded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from benchmarks.common.figures import ms, timed
from benchmarks.common.requests import Request
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import RetrievalSettings

WARMUP = 3
#: Issue #25: the entity fan-out costs at most this many semantic queries.
FAN_OUT_GOAL = 3.0


def fan_out(store, embedder, requests: Sequence[Request], cache_entries: int) -> dict:
    """Per request (after WARMUP): seconds of the semantic query and of the entity fan-out, each
    with its embeddings, and the two stages inside retrieve()."""
    settings = replace(RetrievalSettings(), query_vector_cache=cache_entries)
    retriever = Retriever(store, embedder, settings)
    out: dict[str, list[float]] = {"query": [], "names": [], "semantic": [], "entities": []}
    for i, request in enumerate(requests):
        query, _ = timed(lambda r=request: retriever.search(r.query))
        names, _ = timed(lambda r=request: retriever.search_by_entities(r.entities))
        # the retrieve() stages, on a retriever whose cache already holds this request's names
        answer = retriever.retrieve(request.query, request.entities, request.terms)
        if i < WARMUP:
            continue
        out["query"].append(query)
        out["names"].append(names)
        out["semantic"].append(answer.timings["semantic"])
        out["entities"].append(answer.timings["entities"])
    out["hit_rate"] = [retriever.vector_cache.hit_rate]
    return out


def ratios(numerator: list[float], denominator: list[float]) -> tuple[float, float]:
    """(p50 ratio, p95 ratio) of two timing lists."""
    return (
        metrics.p50(numerator) / metrics.p50(denominator),
        metrics.p95(numerator) / metrics.p95(denominator),
    )


def fan_out_lines(cached: dict, uncached: dict, ann) -> list[str]:
    """Markdown: the fan-out with and without the cache, and in store time only."""
    rows = [
        ("with embeddings, query-vector cache on (shipped)", cached["names"], cached["query"],
         f"{cached['hit_rate'][0]:.0%}"),
        ("with embeddings, cache off (every name embedded)", uncached["names"], uncached["query"],
         "-"),
        ("store only (stages inside `retrieve()`)", cached["entities"], cached["semantic"], "-"),
    ]  # fmt: skip
    lines = [
        f"Entity fan-out vs the semantic query on the first build, ef_search semantic"
        f" {ann.ef_search} / entities {ann.ef_search_entities}, real ONNX query embedding,"
        f" {len(cached['query'])} requests after {WARMUP} warm-up; the names are drawn from a"
        " pool of ~250 (genes, models, outcomes, title heads), as an assistant's entity names"
        " recur:",
        "",
        "| measured as | semantic query p50 / p95 ms | entity fan-out p50 / p95 ms |"
        " fan-out / query at p50 / p95 | cache hit rate |",
        "|---|---|---|---|---|",
    ]
    verdicts = []
    for label, names, query, hits in rows:
        p50, p95 = ratios(names, query)
        verdicts.append(max(p50, p95) <= FAN_OUT_GOAL)
        lines.append(f"| {label} | {ms(query)} | {ms(names)} | {p50:.2f}x / {p95:.2f}x | {hits} |")
    shipped = "met" if verdicts[0] else "NOT met"
    store = "met" if verdicts[2] else "NOT met"
    lines += [
        "",
        f"Goal fan-out <= {FAN_OUT_GOAL:.0f}x the semantic query, as a request pays it (with"
        f" embeddings, cache on): **{shipped}**; in store time alone: {store}.",
    ]
    return lines
