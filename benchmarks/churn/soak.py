"""Churn soak: months of update drops on the 62k workload, and what they do to the HNSW graph.

Each drop replaces `share` of the papers (new vectors and text, same pmids) through the
product's replace_papers (DELETE + COPY, one transaction) on the embedded Postgres with its
default autovacuum; every `every` drops: final recall@15 of retrieve() against the exact oracle,
HNSW / GIN / heap bytes, dead tuples, (auto)vacuums, retrieve() p50 / p95. At the end the final
content is built fresh in another table and both are measured side by side (the goals'
reference). Unattended, one command; --quick is a short run.
"""

from __future__ import annotations

import logging
import time

from psycopg import sql

from benchmarks.churn.loop import SoakLog, SoakPlan, measure, run_soak
from benchmarks.churn.reindex import retrieve_during_reindex
from benchmarks.churn.report import partial_section, section
from benchmarks.churn.revisions import Reviser
from benchmarks.common.data import bench_dir, embed_cached, scifact_records
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import latency_workload
from benchmarks.common.stores import embedded_postgres
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.backends.pg.health import estimate_fresh_sizes, table_health
from candlefire_pipeline.backends.pg.version import read_versions
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
PACED_SETTINGS = {"autovacuum_naptime": "5s", "autovacuum_vacuum_cost_delay": "0"}
AUTOVACUUM_SETTINGS = (
    "autovacuum", "autovacuum_naptime", "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_scale_factor", "autovacuum_vacuum_cost_delay",
    "maintenance_work_mem",
)  # fmt: skip


def fill(dsn: str, table: str, rows, model_id: str, dim: int):
    """A fresh table holding exactly `rows` (first-build path: indexes after the load)."""
    store = build_backend("pgvector", dsn, table=table, ann=pg_ann_params(Settings.from_env()))
    store.reset()
    store.ensure_schema(model_id, dim)
    store.replace_papers(rows)
    store.conn.execute(f"VACUUM (ANALYZE) {table}")
    return store


def server_facts(store) -> dict:
    facts = {name: store.conn.execute(f"SHOW {name}").fetchone()[0] for name in AUTOVACUUM_SETTINGS}
    facts["versions"] = read_versions(store.conn).describe()
    return facts


def pace_autovacuum(store, pace: bool) -> None:
    """Stand-ins for the hours between daily drops (the trigger thresholds stay the server's
    defaults): a 5-s naptime, and no cost throttle, which only spreads the same vacuum over more
    wall time (~4.5 min per drop here with it, too long for 50 drops in one sitting)."""
    for name, value in PACED_SETTINGS.items():
        statement = (
            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            if pace
            else sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name))
        )
        store.conn.execute(statement)
    store.conn.execute("SELECT pg_reload_conf()")


def soak(embedder, dsn: str, args, progress=None) -> dict:
    work = latency_workload(embedder, args.size)
    records = scifact_records()
    base = embed_cached(embedder, [r["title"] for r in records])
    reviser = Reviser(work.corpus, records, base)
    requests = work.requests(args.requests)
    memory = build_backend("memory")
    memory.replace_papers(reviser.rows(embedder.model_id))
    store = fill(dsn, "churn", reviser.rows(embedder.model_id), embedder.model_id, embedder.dim)
    # set or reset: ALTER SYSTEM outlives a paced run that was killed before its finally
    pace_autovacuum(store, args.pace)
    facts = server_facts(store)
    plan = SoakPlan(
        args.drops, args.every, args.share, pace=args.pace, maintain_every=args.maintain_every,
        upkeep=args.upkeep,
    )  # fmt: skip
    soak_log = SoakLog()
    points: list = []
    shown = {"facts": facts, "rows": work.rows.num_rows, "papers": len(reviser.pmids),
             "points": points, "log": soak_log}  # fmt: skip

    def checkpoint(point) -> None:
        points.append(point)
        if progress:
            progress(shown)

    try:
        points[:] = run_soak(store, memory, reviser, embedder, requests, plan, checkpoint, soak_log)
    finally:
        pace_autovacuum(store, False)
    churned = table_health(store.conn, "churn")
    estimate_fresh_sizes(store.conn, churned)
    fresh = fill(dsn, "churn_fresh", reviser.rows(embedder.model_id), embedder.model_id,
                 embedder.dim)  # fmt: skip
    # side by side on the same content: two alternating rounds each, the better p95 kept
    final = {"churned": [], "fresh": []}
    for _ in range(2):
        for name, table in (("churned", store), ("fresh", fresh)):
            final[name].append(measure(table, memory, embedder, requests, args.drops, 0.0))
    reindex = retrieve_during_reindex(dsn, store, embedder, requests)
    for s in (store, fresh):
        s.close()
    return {
        "points": points, "final": final, "estimate": churned, "facts": facts,
        "rows": work.rows.num_rows, "papers": len(reviser.pmids), "reindex": reindex,
        "log": soak_log,
    }  # fmt: skip


def run(args, out) -> None:
    embedder = MemoEmbedder(embedder_for(Settings.from_env(), "query"))
    started, load = time.perf_counter(), LoadMonitor(markers=[bench_dir()]).start()

    def progress(shown: dict) -> None:
        # figures so far land even if the soak is stopped
        note, spent = load.note(), time.perf_counter() - started
        out.write("churn", partial_section(shown, args, note, spent))

    with embedded_postgres() as dsn:
        result = soak(embedder, dsn, args, progress)
    out.section("churn", section(result, args, load.stop().note(), time.perf_counter() - started))
