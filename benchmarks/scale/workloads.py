"""The two request workloads of the cost curve, and running one on a retriever.

- assistant: an ALS assistant's traffic. Entity names come from the bounded pool the retrieval
  benchmarks use (ALS genes, models, outcomes, SciFact title heads) and codes from one half of
  the corpus's codes; every query text is new. Warm = after one pass over the pool (each name and
  code asked once), as a long-running reader is after its first hours.
- cold: every entity name and code unseen before in the run (the other half of the codes, title
  heads outside the pool), each used once, on a term cache emptied first: what a request costs
  when nothing recurs.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.common.corpus import entity_pool, spelling
from benchmarks.common.data import scifact_queries
from benchmarks.common.requests import Request
from benchmarks.scale.queries import summarize
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever

log = logging.getLogger(__name__)

NAMES_PER_REQUEST = 12
#: Unmeasured requests before the measured ones (connection, index pages, ONNX session).
WARMUP = 3


@dataclass(frozen=True)
class Workloads:
    #: one pass over the assistant pool: every name and code asked once
    pool_pass: list[Request]
    assistant: list[Request]
    cold_warmup: list[Request]
    cold: list[Request]


def _halves(codes: Sequence[str]) -> tuple[list[str], list[str]]:
    middle = len(codes) // 2
    return list(codes[:middle]), list(codes[middle:])


def workloads(corpus, n: int, seed: int = 23) -> Workloads:
    """The assistant and cold request sets over a ScaleCorpus (same texts at every size)."""
    rng = random.Random(seed)
    papers, _ = corpus._source
    titles = [p["title"] for p in papers]
    pool = entity_pool(titles)
    kinds = [corpus.codes_in_abstracts, corpus.codes_in_bodies_only, corpus.absent_codes]
    known, unseen = zip(*(_halves(codes) for codes in kinds), strict=True)
    claims = [q.text for q in scifact_queries()]
    passes = max(math.ceil(len(pool) / NAMES_PER_REQUEST), *(len(c) for c in known))
    if 2 * n + WARMUP + passes > len(claims):
        raise SystemExit(f"{n} requests need more SciFact claims than the {len(claims)} there are")
    fresh_names = [h for h in dict.fromkeys(_heads(titles[200:])) if h not in set(pool)]
    cold_needed = (n + WARMUP) * NAMES_PER_REQUEST
    if len(fresh_names) < cold_needed or min(len(c) for c in unseen) < n + WARMUP:
        raise SystemExit(f"not enough unseen names or codes for {n} cold requests")

    def pool_request(i: int, text: str) -> Request:
        names = [pool[(i * NAMES_PER_REQUEST + k) % len(pool)] for k in range(NAMES_PER_REQUEST)]
        terms = [spelling(rng, codes[i % len(codes)]) for codes in known]
        return Request(text, tuple(names), tuple(terms))

    def assistant(text: str) -> Request:
        terms = [spelling(rng, rng.choice(codes)) for codes in known]
        return Request(text, tuple(rng.sample(pool, NAMES_PER_REQUEST)), tuple(terms))

    def cold(i: int, text: str) -> Request:
        names = fresh_names[i * NAMES_PER_REQUEST : (i + 1) * NAMES_PER_REQUEST]
        return Request(text, tuple(names), tuple(spelling(rng, c[i]) for c in unseen))

    start = 2 * n + WARMUP
    return Workloads(
        pool_pass=[pool_request(i, claims[start + i]) for i in range(passes)],
        assistant=[assistant(text) for text in claims[:n]],
        cold_warmup=[cold(i, claims[n + i]) for i in range(WARMUP)],
        cold=[cold(WARMUP + i, claims[n + WARMUP + i]) for i in range(n)],
    )


def _heads(titles: Sequence[str]) -> list[str]:
    return [" ".join(t.split()[:3]).strip(".,:;") for t in titles]


def run_workload(
    retriever: Retriever,
    requests: Sequence[Request],
    oracle: Sequence[Retrieval],
    warmup: Sequence[Request] = (),
) -> dict:
    """Latency and recall of `requests` on this retriever, after `warmup` unmeasured ones."""
    for request in warmup:
        retriever.retrieve(request.query, request.entities, request.terms)
    terms = getattr(retriever.backend, "terms", None)
    before = (terms.stats.hits, terms.stats.misses) if terms is not None else (0, 0)
    started = time.perf_counter()
    answers = [retriever.retrieve(r.query, r.entities, r.terms) for r in requests]
    log.info("%d requests in %.1f s", len(answers), time.perf_counter() - started)
    out = summarize(answers, oracle, retriever.vector_cache.hit_rate)
    if terms is not None:
        hits, misses = terms.stats.hits - before[0], terms.stats.misses - before[1]
        out["term_cache_hit_rate"] = hits / (hits + misses) if hits + misses else 0.0
    return out


def pool_pass(retriever: Retriever, requests: Sequence[Request]) -> float:
    """One pass over the pool (each name and code asked once); its seconds."""
    started = time.perf_counter()
    for request in requests:
        retriever.retrieve(request.query, request.entities, request.terms)
    return time.perf_counter() - started
