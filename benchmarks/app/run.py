"""The app benchmark: candle-fire's search path through `open_collection()` on the scale corpus
(the same request texts at every size), from 62,196 to 1,000,000 chunks.

At the first size the collection, the real Chroma collection and ServingReader side by side
(side_by_side.py) and app threads sharing the collection; at every size the collection warm and
cold, and its warm answers against the exact referee (scaled.py). The stores are the scale
benchmarks' (built once under data/bench_retrieval, reused), with every serving index: the
insertion-order index and the phrase index as the store asset builds them.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from benchmarks.app import scaled, side_by_side
from benchmarks.app.report import markdown
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


def measure_size(dsn: str, embedder, size: int, args, app_dir, first: bool) -> dict:
    corpus = ensure_pg_table(dsn, embedder, size)
    serving_indexes(dsn, size)
    sets = workloads(corpus, args.requests)
    settings = serving_deployment(dsn, table_name(size), "pgvector", app_dir)
    settings = replace(settings, shadow=replace(settings.shadow, rate=0.0))
    result: dict = {"size": size, "requests": len(sets.assistant)}
    if first:
        load_chroma(corpus)
        arms, verdicts = side_by_side.measure(
            settings, embedder, sets.pool_pass, sets.assistant,
            (chroma_path(size), table_name(size)), size,
        )  # fmt: skip
        result |= {"arms": arms, "verdicts": verdicts}
        collection = arms[side_by_side.COLLECTION_PG]
        result["warm"] = scaled.Timed(collection.seconds, collection.answered, collection.answers)
        result["threads"] = [scaled.threads(settings, embedder, sets.assistant, n)
                             for n in (1, args.threads)]  # fmt: skip
    else:
        result["warm"] = scaled.warm(settings, embedder, sets.pool_pass, sets.assistant)
    log.info("%d: warm done", size)
    result["cold"] = scaled.cold(settings, embedder, sets.cold_warmup, sets.cold)
    log.info("%d: cold done", size)
    result["referee"] = scaled.against_referee(settings, embedder, size, sets.assistant,
                                               result["warm"].answers)  # fmt: skip
    return result


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    results = []
    with (embedded_postgres() as dsn, scratch_dir("bench-app-") as app_dir,
          LoadMonitor(markers=[bench_dir()]) as monitor):  # fmt: skip
        for i, size in enumerate(args.sizes):
            results.append(measure_size(dsn, embedder, size, args, app_dir, first=i == 0))
            log.info("app %d done", size)
    facts = {"pg_ef_search": Settings.from_env().hnsw_ef_search}
    out.section("app", markdown(results, facts, monitor.note()))
