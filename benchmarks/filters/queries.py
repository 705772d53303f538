"""Filtered semantic queries (the protocol's Filter: year range, has_full_text, pmids) at
selectivities 50%, 10%, 1% and 0.1% of 250,000 chunks, on every store, against the exact oracle.

Per case: rows returned (LIMIT = 60, the semantic stage's 2n, unless fewer rows match) and
recall@LIMIT of the chunk ids against the exact oracle (numpy over the same vectors, same filter),
latency p50 / p95. pgvector: its default layout under each iterative-scan setting
(hnsw.iterative_scan off / relaxed_order / strict_order, hnsw.max_scan_tuples), the plan the
planner chose, then the halfvec and binary layouts at the product's settings; Chroma
(ChromaBackend) and Qdrant local mode (exact in Python).

Qdrant local mode matches a pmids filter point by point against the whole list in Python
(qdrant_client's local MatchAny; ~5.5M comparisons/s here), so a query's cost grows with points x
pmids: ~20 min for one pmids-50% query at 250k chunks. Each store's case therefore stops after
the query that spends --case-budget seconds (the section counts the queries each cell ran);
--stores leaves Chroma or Qdrant out (pgvector always runs: the oracle and the
plans read its table).
"""

from __future__ import annotations

import json
import logging

import numpy as np

from benchmarks.common.data import bench_dir, scifact_queries
from benchmarks.common.figures import ms
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.matrix_oracle import MatrixOracle
from benchmarks.common.scaled.stores import (
    ensure_pg_table,
    load_chroma,
    load_qdrant,
    open_chroma,
    qdrant_path,
)
from benchmarks.common.scaled.tables import ServerMemory, build_ann, open_layout, table_name
from benchmarks.common.stores import embedded_postgres
from benchmarks.filters import cases as fc
from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.layout import stage_effort
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
#: pgvector iterative-scan settings measured on the default layout (the first is the product's).
PG_SCANS = (("relaxed_order", 20_000), ("off", 20_000), ("strict_order", 20_000),
            ("relaxed_order", 100_000))  # fmt: skip


def plan_of(store, vector: np.ndarray, where: Filter) -> str:
    """The scan the planner chose for one filtered semantic query (EXPLAIN, not run)."""
    candidates = store.layout.candidates(fc.LIMIT, store.ann.rerank_factor)
    store._session.apply(store.conn, stage_effort(store.ann, "semantic", candidates).gucs())
    query, params = pg_sql.semantic_query(
        store.names, where, [vector], fc.LIMIT, store.layout, len(vector), candidates
    )
    plan = store.conn.execute(b"EXPLAIN (FORMAT JSON) " + query.as_bytes(store.conn), params)
    nodes: list[str] = []

    def walk(node: dict) -> None:
        if "Scan" in node["Node Type"]:
            index = node.get("Index Name", "")
            kinds = {"_embedding_hnsw": "HNSW", "_pmid_chunk": "pmid btree", "_pkey": "primary key"}
            kind = next((v for k, v in kinds.items() if index.endswith(k)), index or "table")
            nodes.append(f"{node['Node Type'].lower()} ({kind})")
        for child in node.get("Plans", []):
            walk(child)

    walk(plan.fetchone()[0][0]["Plan"])
    return ", ".join(n for n in nodes if "function" not in n)


#: Store seconds one store may spend on one case (set from --case-budget).
CASE_BUDGET = {"seconds": 120.0}


def run_store(label: str, store, oracle, cases, queries, results: dict) -> None:
    for case in cases:
        measured = fc.measure(store, oracle, case, queries, CASE_BUDGET["seconds"])
        results.setdefault(label, []).append(measured)
    log.info("%s: %s", label, [round(r["recall"], 3) for r in results[label]])


def pg_part(dsn, size, oracle, cases, queries, results, plans, layouts) -> None:
    for iterative, tuples in PG_SCANS:
        store = open_layout(dsn, table_name(size), "vector", iterative_scan=iterative,
                            max_scan_tuples=tuples)  # fmt: skip
        label = f"pgvector vector, {iterative}, max_scan_tuples {tuples:,}"
        run_store(label, store, oracle, cases, queries, results)
        if not plans:
            plans.extend(plan_of(store, queries[0], c.where) for c in cases)
        store.close()
    memory = ServerMemory(bench_dir() / "pg")
    try:
        for layout in [x for x in layouts if x != "vector"]:
            build_ann(dsn, size, layout, memory)
            store = open_layout(dsn, table_name(size), layout)
            run_store(f"pgvector {layout} (product settings)", store, oracle, cases, queries,
                      results)  # fmt: skip
            store.close()
        if layouts != ["vector"]:
            build_ann(dsn, size, "vector", memory)  # leave the table as the product builds it
    finally:
        memory.stop()


def markdown(size, cases, results, plans, note) -> str:
    header = " | ".join(f"{c.kind} {c.target:.1%}" for c in cases)
    lines = [
        "## Filtered semantic queries",
        "",
        f"{size:,} chunks (the retrieval workload at this size); per case the same SciFact"
        f" claims as query vectors, `semantic_candidates(n={fc.LIMIT}, where=...)` (the semantic"
        " stage's 2n); recall of the chunk ids against the exact oracle with the same filter."
        " years = a contiguous year range (with has_full_text=false where years alone cannot be"
        " that selective); pmids = whole papers drawn at random. pgvector asks a query again"
        " exactly when its walk ends (hnsw.max_scan_tuples) with fewer than n rows, so its rows"
        " returned reach the LIMIT; such a cell's latency is the walk plus the exact ask (with"
        " iterative scan `off`, most selective cases are answered that way). Chroma asks a long"
        " pmids list in pages of 5,000 (SQLite binds at most 32,766 variables per statement).",
        "",
        "| case | filter | selectivity (measured) | chunks matching | rows expected |"
        " pgvector plan (product settings) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for case, plan in zip(cases, plans, strict=True):
        shown = _filter_text(case.where)
        lines.append(
            f"| {case.kind} {case.target:.1%} | {shown} | {case.selectivity:.3%} |"
            f" {case.matching:,} | {min(fc.LIMIT, case.matching)} | {plan} |"
        )
    lines += ["", "Recall@60 (mean rows returned / expected, lowest rows in brackets):", "",
              f"| store | {header} |", "|---|" + "---|" * len(cases)]  # fmt: skip
    for label, rows in results.items():
        cells = [f"{r['recall']:.3f} ({r['rows_mean']:.1f} / {r['expected']}, min"
                 f" {r['rows_min']}{_queries_note(r)})" for r in rows]  # fmt: skip
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Latency p50 / p95 ms:", "", f"| store | {header} |",
              "|---|" + "---|" * len(cases)]  # fmt: skip
    for label, rows in results.items():
        lines.append(f"| {label} | " + " | ".join(ms(r["seconds"]) for r in rows) + " |")
    budget = (f"Each store's case stops after the query that spends {CASE_BUDGET['seconds']:g} s"
              " (a cell that ran fewer queries than asked says so).")  # fmt: skip
    return "\n".join([*lines, "", budget, "", note])


def _queries_note(result: dict) -> str:
    if result["queries"] == result["asked"]:
        return ""
    return f"; {result['queries']} of {result['asked']} queries, budget spent"


def _filter_text(where: Filter) -> str:
    if where.pmids is not None:
        return f"{len(where.pmids):,} pmids"
    text = f"year {where.min_year}-{where.max_year}"
    return text + (", has_full_text=false" if where.has_full_text is False else "")


def run(args, out) -> None:
    CASE_BUDGET["seconds"] = args.case_budget
    # pgvector always runs: the oracle reads its table and the plans are its own
    stores = set(args.stores)
    embedder = embedder_for(Settings.from_env(), "query")
    queries = embedder.embed([q.text for q in scifact_queries()[: args.queries]])
    monitor = LoadMonitor(markers=[bench_dir()]).start()
    results: dict[str, list[dict]] = {}
    plans: list[str] = []
    with embedded_postgres() as dsn:
        corpus = ensure_pg_table(dsn, embedder, args.size)
        reader = open_layout(dsn, table_name(args.size), "vector")
        oracle = MatrixOracle(corpus, reader)
        cases = fc.cases(oracle)
        pg_part(dsn, args.size, oracle, cases, queries, results, plans, args.layouts)
        if "chroma" in stores:
            load_chroma(corpus)
            chroma = open_chroma(args.size)
            run_store("chroma (ef_search 100, product setting)", chroma, oracle, cases, queries,
                      results)  # fmt: skip
            chroma.close()
        if "qdrant" in stores:
            load_qdrant(corpus)
            qdrant = build_backend("qdrant", path=qdrant_path(args.size),
                                   collection=table_name(args.size))  # fmt: skip
            run_store("qdrant local mode", qdrant, oracle, cases, queries, results)
            qdrant.close()
        reader.close()
    text = markdown(args.size, cases, results, plans, monitor.stop().note())
    (bench_dir() / f"filters_{args.size}.json").write_text(json.dumps(results, indent=1))
    out.section("filters", text)
