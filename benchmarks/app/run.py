"""The app benchmark: candle-fire's search path through `open_collection()` on the scale corpus
(the same request texts at every size), from 62,196 to 1,000,000 chunks.

The `app` part (section `app`): at the first size the collection, the real Chroma collection and
ServingReader side by side (side_by_side.py) and app threads sharing the collection; at every
size the collection warm and cold, and its warm answers against the exact referee (scaled.py).
The `network` part (section `app-network`, network_run.py): at the first size, the collection
and the reader across a loopback delay proxy at each RTT, threads, the staleness window and the
install. The stores are the scale
benchmarks' (built once under data/bench_retrieval, reused), with every serving index: the
insertion-order index and the phrase index as the store asset builds them.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from benchmarks.app import network_run, scaled, side_by_side
from benchmarks.app.report import markdown
from benchmarks.app.unseen import unseen
from benchmarks.common.data import bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.stores import chroma_path, ensure_pg_table, load_chroma
from benchmarks.common.scaled.tables import open_layout, table_name
from benchmarks.common.stores import (
    embedded_postgres,
    ensure_indexes,
    scratch_dir,
    serving_deployment,
)
from benchmarks.scale.workloads import workloads
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


def serving_indexes(dsn: str, size: int) -> None:
    """Every index a served table has (IF NOT EXISTS), the phrase index built as after a write."""
    store = open_layout(dsn, table_name(size), "vector")
    try:
        ensure_indexes(store)
        store.build_phrase_index()
        store.clear_term_cache("the app benchmark starts cold")
    finally:
        store.close()


def deployment(dsn: str, embedder, size: int, app_dir):
    """The size's table served (built once), its workloads, and settings reading it."""
    corpus = ensure_pg_table(dsn, embedder, size)
    serving_indexes(dsn, size)
    settings = serving_deployment(dsn, table_name(size), "pgvector", app_dir)
    return corpus, replace(settings, shadow=replace(settings.shadow, rate=0.0))


def measure_size(dsn: str, embedder, size: int, args, app_dir, first: bool) -> dict:
    corpus, settings = deployment(dsn, embedder, size, app_dir)
    sets = workloads(corpus, args.requests)
    result: dict = {"size": size, "requests": len(sets.assistant)}
    warm_pass, timed = [*sets.pool_pass, *sets.assistant], unseen(sets.assistant, "timed")
    if first:
        load_chroma(corpus)
        arms, verdicts = side_by_side.measure(
            settings, embedder, warm_pass, timed, (chroma_path(size), table_name(size)), size,
        )  # fmt: skip
        result |= {"arms": arms, "verdicts": verdicts}
        collection = arms[side_by_side.COLLECTION_PG]
        result["warm"] = scaled.Timed(collection.seconds, collection.answered, collection.answers)
        result["threads"] = [scaled.threads(settings, embedder, warm_pass, timed, n)
                             for n in (1, args.threads)]  # fmt: skip
    else:
        result["warm"] = scaled.warm(settings, embedder, warm_pass, timed)
    log.info("%d: warm done", size)
    result["cold"] = scaled.cold(settings, embedder, sets.cold_warmup, sets.cold)
    log.info("%d: cold done", size)
    result["referee"] = scaled.against_referee(settings, embedder, size, timed,
                                               result["warm"].answers)  # fmt: skip
    return result


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    with embedded_postgres() as dsn, scratch_dir("bench-app-") as app_dir:
        if "app" in args.parts:
            results = []
            with LoadMonitor(markers=[bench_dir()]) as monitor:
                for i, size in enumerate(args.sizes):
                    results.append(measure_size(dsn, embedder, size, args, app_dir, i == 0))
                    log.info("app %d done", size)
            facts = {"pg_ef_search": Settings.from_env().hnsw_ef_search}
            out.section("app", markdown(results, facts, monitor.note()))
        if "network" in args.parts:
            corpus, settings = deployment(dsn, embedder, args.sizes[0], app_dir)
            sets = workloads(corpus, args.requests)
            result = network_run.measure(settings, embedder, dsn, corpus, sets, args)
            out.section("app-network", network_run.section(result))
