"""Full retrieve() on a store against the exact oracle: latency and recall@15 of the final list
and of each stage's list (the figures of every size in the cost curve)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from benchmarks.common.matrix_oracle import MatrixOracle
from benchmarks.common.requests import Request, final_recall, list_recall
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever

log = logging.getLogger(__name__)

WARMUP = 3
#: Stage lists whose recall is reported, by their Retrieval attribute.
STAGE_LISTS = {"semantic": "semantic_pmids", "entities": "entity_pmids",
               "keyword": "keyword_pmids"}  # fmt: skip
#: Stages whose time is reported (the query embedding and grounding besides the three lists).
TIMED = ("embed", *STAGE_LISTS, "grounding")


def oracle_answers(corpus, store, embedder, requests: Sequence[Request]) -> list[Retrieval]:
    """The requests on exact ANN (MatrixOracle over `store`'s rows), embedded by `embedder` (a
    MemoEmbedder: the measured runs then get the same vectors)."""
    retriever = Retriever(MatrixOracle(corpus, store), embedder)
    started = time.perf_counter()
    answers = [retriever.retrieve(r.query, r.entities, r.terms) for r in requests]
    log.info("oracle answered %d requests in %.0f s", len(requests), time.perf_counter() - started)
    return answers


def measure(
    store,
    embedder,
    requests: Sequence[Request],
    oracle: Sequence[Retrieval],
    budget_s: float | None = None,
) -> dict:
    """Latency and recall of `requests` (after WARMUP unmeasured ones) through the product's
    Retriever (its query-vector cache as configured); stops early past `budget_s` seconds."""
    retriever = Retriever(store, embedder)
    for request in requests[:WARMUP]:
        retriever.retrieve(request.query, request.entities, request.terms)
    answers: list[Retrieval] = []
    started = time.perf_counter()
    for request in requests:
        answers.append(retriever.retrieve(request.query, request.entities, request.terms))
        if budget_s is not None and time.perf_counter() - started > budget_s:
            log.warning("%s: time budget spent after %d requests", store.name, len(answers))
            break
    return summarize(answers, oracle[: len(answers)], retriever.vector_cache.hit_rate)


def summarize(answers: Sequence[Retrieval], oracle: Sequence[Retrieval], hit_rate: float) -> dict:
    totals = [a.timings["total"] for a in answers]
    stores = [a.timings["total"] - a.timings["embed"] for a in answers]
    return {
        "requests": len(answers),
        "p50": metrics.p50(totals),
        "p95": metrics.p95(totals),
        "store_p50": metrics.p50(stores),
        "store_p95": metrics.p95(stores),
        "stage_p50": {s: metrics.p50([a.timings[s] for a in answers]) for s in TIMED},
        "stage_p95": {s: metrics.p95([a.timings[s] for a in answers]) for s in TIMED},
        "recall": {
            "final": final_recall(answers, oracle),
            **{s: list_recall(answers, oracle, f) for s, f in STAGE_LISTS.items()},
        },
        "cache_hit_rate": hit_rate,
    }
