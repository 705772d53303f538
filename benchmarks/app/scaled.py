"""The collection arm at one size of the scale corpus: warm, cold, against the exact referee, and
shared by app threads.

- warm: after one untimed pass over the name pool and one over the requests (an app that has
  run a while: its term cache, query-vector cache and process copy hold them), the requests
  timed with question texts it has not seen (unseen.py: its process copy would otherwise answer
  a request repeated word for word whole, with no round trip);
- cold: every name and code unseen before (the scale benchmark's cold set), the term cache
  emptied and a new collection (its query-vector cache empty) first, 3 untimed cold requests of
  their own terms, then each measured request once;
- referee: the same table ranked exactly (every row), the warm requests' answers compared;
- threads: N threads sharing one warm collection, each answering its share of the requests
  (unseen question texts, as warm).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from benchmarks.app import search_path
from benchmarks.app.agreement import Verdict, verdict
from benchmarks.common.requests import Request
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Timed:
    """Seconds per request and how the collection answered its calls."""

    seconds: list[float] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)
    answers: list = field(default_factory=list)


def answer(collection, request: Request) -> search_path.Answer:
    return search_path.answer(collection, request.query, list(request.entities),
                              list(request.terms))  # fmt: skip


def _timed(collection, requests: Sequence[Request]) -> Timed:
    before = collection.answered
    out = Timed()
    for request in requests:
        started = time.perf_counter()
        out.answers.append(answer(collection, request))
        out.seconds.append(time.perf_counter() - started)
    after = collection.answered
    out.answered = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    return out


def warm(settings: Settings, embedder, warm_pass: Sequence[Request],
         requests: Sequence[Request]) -> Timed:  # fmt: skip
    """`requests` timed on a collection warmed on `warm_pass` (the timed texts unseen)."""
    with open_collection(settings, embedder) as collection:
        for request in warm_pass:
            answer(collection, request)
        return _timed(collection, requests)


def clear_term_cache(settings: Settings) -> None:
    store = build_backend("pgvector", settings.pg_dsn, table=settings.pg_table,
                          ann=pg_ann_params(settings))  # fmt: skip
    try:
        store.clear_term_cache("the app benchmark's cold requests")
    finally:
        store.close()


def cold(settings: Settings, embedder, warmup: Sequence[Request],
         requests: Sequence[Request]) -> Timed:  # fmt: skip
    clear_term_cache(settings)
    with open_collection(settings, embedder) as collection:
        for request in warmup:  # connection, index pages, the ONNX session: not the terms
            answer(collection, request)
        return _timed(collection, requests)


def exact_settings(settings: Settings, size: int) -> Settings:
    """The same deployment, pgvector ranking every row (no HNSW walk): the referee."""
    return replace(settings, pg_ann=replace(settings.pg_ann, full_scan_rows=size + 1),
                   term_cache=replace(settings.term_cache, enabled=False))  # fmt: skip


def against_referee(settings: Settings, embedder, size: int, requests: Sequence[Request],
                    answers: Sequence) -> list[Verdict]:  # fmt: skip
    with open_collection(exact_settings(settings, size), embedder) as referee:
        exact = [answer(referee, r) for r in requests]
    return [verdict({"referee": e, "collection": a}, e) for e, a in zip(exact, answers,
                                                                       strict=True)]  # fmt: skip


def threads(settings: Settings, embedder, warm_pass: Sequence[Request],
            requests: Sequence[Request], count: int) -> dict:  # fmt: skip
    """`count` threads sharing one collection warmed on `warm_pass`, each answering every
    `count`-th of `requests`: requests per second over the wall time."""
    with open_collection(settings, embedder) as collection:
        for request in warm_pass:
            answer(collection, request)
        seconds = shared_by_threads(collection, requests, count)
    return {"threads": count, "requests": len(requests), "seconds": seconds,
            "per_second": len(requests) / seconds}  # fmt: skip


def shared_by_threads(collection, work: Sequence[Request], count: int) -> float:
    """Seconds for `count` threads sharing `collection` to answer `work` (thread k every
    `count`-th request from the k-th), started together; a thread's error is raised after."""
    errors: list[BaseException] = []
    start = threading.Barrier(count + 1)

    def share(k: int) -> None:
        start.wait()
        try:
            for request in work[k::count]:
                answer(collection, request)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    workers = [threading.Thread(target=share, args=(k,)) for k in range(count)]
    for worker in workers:
        worker.start()
    start.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    return seconds
