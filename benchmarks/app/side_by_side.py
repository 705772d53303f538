"""candle-fire's search path at 62,196 chunks through `open_collection()` on pgvector vs the same
calls on the real Chroma collection (as candle-fire ships it: a persisted folder, ef_search 100,
its embedding function embedding each query's texts), and beside them `ServingReader.retrieve`
on the same requests, warm (after one untimed pass over them, as an app that has run a while).

One process, the three arms interleaved request by request (the order rotating), so drift and
other work on the machine fall on all three alike. The two collection arms' answers are compared
request by request, with an exact pgvector collection (every row ranked) as the referee for
stages whose members differ (agreement.py). The stores are the retrieval latency workload's,
cached under data/bench_retrieval (built on first use).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from benchmarks.app import search_path
from benchmarks.app.agreement import Verdict, verdict
from benchmarks.app.counting import CountingCalls, CountingEmbedder, open_chroma_collection
from benchmarks.app.report import markdown
from benchmarks.common.data import LATENCY_CHUNKS, bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import Request, latency_workload
from benchmarks.common.stores import (
    chroma_store_path,
    embedded_postgres,
    ensure_indexes,
    load,
    open_store,
    scratch_dir,
    serving_deployment,
    sized_label,
)
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
COLLECTION_PG = "open_collection() on pgvector"
CHROMA, READER = "Chroma collection", "ServingReader"
ARMS = (COLLECTION_PG, CHROMA, READER)


@dataclass
class Arm:
    """One way of answering a request, and what it cost per request."""

    name: str
    answer: Callable[[Request], object]
    embedder: CountingEmbedder
    calls: CountingCalls | None = None  # None: one retrieve() per request
    seconds: list[float] = field(default_factory=list)
    embed_seconds: list[float] = field(default_factory=list)
    answers: list = field(default_factory=list)
    call_counts: dict[str, int] = field(default_factory=dict)
    embedder_calls: int = 0
    texts: int = 0

    def timed(self, request: Request) -> None:
        calls, texts, spent = self.embedder.calls, self.embedder.texts, self.embedder.seconds
        before = dict(self.calls.calls) if self.calls else {}
        started = time.perf_counter()
        self.answers.append(self.answer(request))
        self.seconds.append(time.perf_counter() - started)
        self.embed_seconds.append(self.embedder.seconds - spent)
        self.embedder_calls += self.embedder.calls - calls
        self.texts += self.embedder.texts - texts
        made = {"retrieve": 1} if self.calls is None else {
            name: n - before.get(name, 0) for name, n in self.calls.calls.items()
        }  # fmt: skip
        for name, n in made.items():
            self.call_counts[name] = self.call_counts.get(name, 0) + n


def rotated(items: tuple, by: int) -> tuple:
    by %= len(items)
    return items[by:] + items[:by]


def search_answer(collection) -> Callable[[Request], search_path.Answer]:
    return lambda r: search_path.answer(collection, r.query, list(r.entities), list(r.terms))


def exact_settings(settings: Settings, size: int) -> Settings:
    """The same deployment, pgvector ranking every row (no HNSW walk): the referee."""
    return replace(settings, pg_ann=replace(settings.pg_ann, full_scan_rows=size + 1))


def measure(settings: Settings, embedder, requests: list[Request], warmup: int,
            size: int) -> tuple[dict[str, Arm], list[Verdict]]:  # fmt: skip
    """Every request on each arm, interleaved; the collection arms' answers compared."""
    settings = replace(settings, shadow=replace(settings.shadow, rate=0.0))
    counting = {name: CountingEmbedder(embedder) for name in ARMS}
    served = open_collection(settings, counting[COLLECTION_PG])
    client, chroma = open_chroma_collection(chroma_store_path(), settings.chroma_collection,
                                            counting[CHROMA])  # fmt: skip
    reader = ServingReader(settings, counting[READER])
    referee = open_collection(exact_settings(settings, size), embedder)
    try:
        pg_calls, chroma_calls = CountingCalls(served), CountingCalls(chroma)
        arms = {
            COLLECTION_PG: Arm(COLLECTION_PG, search_answer(pg_calls), counting[COLLECTION_PG],
                               pg_calls),
            CHROMA: Arm(CHROMA, search_answer(chroma_calls), counting[CHROMA], chroma_calls),
            READER: Arm(READER, lambda r: reader.retrieve(r.query, r.entities, r.terms),
                        counting[READER]),
        }  # fmt: skip
        for request in requests[:warmup]:  # connections, Chroma's index load, first embeds
            arms[COLLECTION_PG].answer(request)
            arms[CHROMA].answer(request)
        for request in requests:  # the app that has run a while: its caches hold these
            arms[READER].answer(request)
        if served.target is None or served.target.backend != "pgvector":
            raise RuntimeError(f"the collection read {served.target}, not pgvector")
        for i, request in enumerate(requests):
            for name in rotated(ARMS, i):
                arms[name].timed(request)
            log.info("request %d of %d: %s", i + 1, len(requests),
                     ", ".join(f"{n} {arms[n].seconds[-1]:.2f} s" for n in ARMS))  # fmt: skip
        exact = [search_answer(referee)(r) for r in requests]
    finally:
        for closing in (served.close, client.close, reader.close, referee.close):
            closing()
    pairs = zip(arms[CHROMA].answers, arms[COLLECTION_PG].answers, exact, strict=True)
    verdicts = [verdict({"Chroma": c, "pgvector": p}, e) for c, p, e in pairs]
    return arms, verdicts


def chroma_ef_search(settings: Settings) -> int | None:
    """The hnsw ef_search the Chroma collection is configured with (what its queries use)."""
    client, chroma = open_chroma_collection(chroma_store_path(), settings.chroma_collection, None)
    try:
        return (chroma.collection.configuration_json.get("hnsw") or {}).get("ef_search")
    finally:
        client.close()


def prepared(dsn: str, label: str, work, embedder) -> None:
    """The workload in both stores (reused when they hold it); pgvector's term cache cold."""
    for name in ("pgvector", "chroma"):
        store = open_store(name, dsn, label)
        try:
            load(store, work.rows, embedder.model_id, embedder.dim)
            if name == "pgvector":
                ensure_indexes(store)
                store.clear_term_cache("the app benchmark's reader starts cold")
        finally:
            store.close()


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    work = latency_workload(embedder, args.size)
    label = sized_label("latency", args.size, LATENCY_CHUNKS)
    requests = work.requests(args.requests)
    with embedded_postgres() as dsn, scratch_dir("bench-app-") as app_dir:
        prepared(dsn, label, work, embedder)
        settings = serving_deployment(dsn, label, "pgvector", app_dir)
        with LoadMonitor(markers=[bench_dir()]) as monitor:
            arms, verdicts = measure(settings, embedder, requests, args.warmup, args.size)
        ef = chroma_ef_search(settings)
    facts = {"size": work.rows.num_rows, "requests": len(requests), "warmup": args.warmup,
             "chroma_ef_search": ef, "pg_ef_search": settings.hnsw_ef_search,
             "full_scan_rows": settings.pg_ann.full_scan_rows}  # fmt: skip
    out.section("app", markdown(arms, verdicts, facts, monitor.note()))
