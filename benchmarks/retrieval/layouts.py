"""vector / halfvec / binary quantization at 62k chunks: recall, latency, sizes, HNSW build times.

Each layout is its own table of the same rows. Recall@15 is measured two ways against the exact
oracle: the chunk-level ANN list (semantic_candidates, k=15) and the final retrieve() list.
HNSW build time at three corpus sizes comes from partial indexes over a fixed hash-based share
of the same table (a build reads the whole heap, but inserts only that share into the graph).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from psycopg import sql

from benchmarks.common.figures import MB, chunk_recall, ms
from benchmarks.common.requests import answer_all, final_recall
from benchmarks.common.stores import load
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.retrieval.retriever import Retriever

logger = logging.getLogger(__name__)

#: name -> (vector_type, quantization, rerank factors measured)
LAYOUTS = {
    "vector": ("vector", "none", (None,)),
    "halfvec": ("halfvec", "none", (None,)),
    "binary": ("vector", "binary", (4, 10, 20)),
}
#: Shares of the table (in quarters, by hash of chunk_id) the HNSW build is timed at.
BUILD_QUARTERS = (1, 2, 4)


def sizes(store: PgVectorBackend) -> dict[str, float]:
    """Heap (+TOAST), all indexes, and the ANN index alone, in MB."""
    table, ann = store.names.ident().as_string(store.conn), store.names.hnsw.as_string(store.conn)
    row = store.conn.execute(
        "SELECT pg_table_size(%s), pg_indexes_size(%s), pg_relation_size(%s)", [table, table, ann]
    ).fetchone()
    return {"table": row[0] / MB, "indexes": row[1] / MB, "ann": row[2] / MB}


def build_times(store: PgVectorBackend, dim: int, total: int) -> list[tuple[int, float, float]]:
    """(rows in the graph, seconds, index MB) of an HNSW build over 1/4, 2/4 and all rows."""
    out = []
    key = store.layout.index_method(dim)
    for quarters in BUILD_QUARTERS:
        name = store.names.ident(f"_build_{quarters}")
        where = sql.SQL("abs(hashtext(chunk_id)) % 4 < {}").format(sql.Literal(quarters))
        statement = sql.SQL(
            "CREATE INDEX {i} ON {t} USING hnsw ({k}) WITH (m = {m}, ef_construction = {ef})"
            " WHERE {w}"
        ).format(
            i=name,
            t=store.names.ident(),
            k=key,
            m=sql.Literal(store.hnsw_m),
            ef=sql.Literal(store.hnsw_ef_construction),
            w=where,
        )
        count = store.conn.execute(
            sql.SQL("SELECT count(*) FROM {t} WHERE {w}").format(t=store.names.ident(), w=where)
        ).fetchone()[0]
        indexed = "bit" if store.layout.quantization == "binary" else store.layout.vector_type
        with store.conn.transaction():
            pg_bulk.use_build_resources(store.conn, pg_bulk.build_memory_mb(count, dim, indexed))
            started = time.perf_counter()
            store.conn.execute(statement)
            seconds = time.perf_counter() - started
        index_mb = store.conn.execute(
            "SELECT pg_relation_size(%s)", [name.as_string(store.conn)]
        ).fetchone()[0]
        store.conn.execute(sql.SQL("DROP INDEX {i}").format(i=name))
        out.append((count, seconds, index_mb / MB))
        logger.info("HNSW build %s over %d rows: %.1f s", store.layout, count, seconds)
    return out


def measure_layout(store, embedder, requests, oracle, qvecs, exact) -> dict:
    found = store.semantic_candidates(qvecs, 15, stage="semantic")
    ann_recall = chunk_recall(found, exact)
    retriever = Retriever(store, embedder)
    answer_all(retriever, requests[:3])
    answers = answer_all(retriever, requests)
    return {
        "ann_recall": float(ann_recall),
        "final": final_recall(answers, oracle),
        "semantic": [a.timings["semantic"] for a in answers],
        "entities": [a.timings["entities"] for a in answers],
        "store": [a.timings["total"] - a.timings["embed"] for a in answers],
    }


def compare(
    dsn, rows, memory, embedder, requests, oracle, base: AnnParams, builds: bool, rebuild: bool,
    prefix: str = "layout",
):  # fmt: skip
    """Markdown lines of the layout comparison (tables `prefix`_<layout>, cached unless
    `rebuild`)."""
    results, build_rows = measure_layouts(
        dsn, rows, memory, embedder, requests, oracle, base, builds, rebuild, prefix
    )
    return layout_lines(rows.num_rows, embedder.dim, len(requests), base, results, build_rows)


def measure_layouts(dsn, rows, memory, embedder, requests, oracle, base, builds, rebuild, prefix):
    """Per layout and re-rank factor: figures, sizes, load time; HNSW build times by size."""
    qvecs = embedder.embed([r.query for r in requests])
    exact = memory.semantic_candidates(qvecs, 15)
    dim = embedder.dim
    results, build_rows = [], []
    for name, (vector_type, quantization, factors) in LAYOUTS.items():
        label = f"{prefix}_{name.replace('+', '_')}"
        ann = replace(base, vector_type=vector_type, quantization=quantization)
        store = build_backend("pgvector", dsn, table=label, ann=ann)
        if rebuild:
            store.reset()
        load_s = load(store, rows, embedder.model_id, dim)
        size = sizes(store)
        if builds:
            build_rows += [(name, *t) for t in build_times(store, dim, rows.num_rows)]
        store.close()
        for factor in factors:
            tuned = replace(ann, rerank_factor=factor) if factor else ann
            store = build_backend("pgvector", dsn, table=label, ann=tuned)
            m = measure_layout(store, embedder, requests, oracle, qvecs, exact)
            store.close()
            shown = f"{name} (re-rank {factor}x)" if factor else name
            results.append((shown, m, size, load_s))
    return results, build_rows


def layout_lines(n_rows, dim, n_requests, base, results, build_rows) -> list[str]:
    lines = [
        f"Storage and ANN options on the same {n_rows:,} chunks ({dim}-dim), per-stage"
        f" ef_search semantic {base.ef_search} / entities {base.ef_search_entities};"
        f" {n_requests} requests, embeddings memoized (store time only). ANN recall@15:"
        " semantic_candidates(k=15) vs the exact oracle's chunks; final recall@15: the final"
        " retrieve() PMIDs vs the oracle's. Binary: HNSW over `binary_quantize(embedding)::bit"
        f"({dim})` (Hamming), n x re-rank candidates re-ranked by exact cosine on the stored"
        " vectors. Build s: first full build (load + every index), 0 = table reused.",
        "",
        "| layout | ANN recall@15 | final recall@15 | semantic p50 / p95 ms | entities p50 / p95"
        " ms | store total p50 / p95 ms | table MB | ANN index MB | all indexes MB | build s |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {shown} | {m['ann_recall']:.4f} | {m['final']:.4f} | {ms(m['semantic'])}"
            f" | {ms(m['entities'])} | {ms(m['store'])} | {size['table']:.0f} |"
            f" {size['ann']:.0f} | {size['indexes']:.0f} | {load_s:.0f} |"
            for shown, m, size, load_s in results
        ),
    ]
    if build_rows:
        lines += [
            "",
            "HNSW build time by corpus size (m / ef_construction from settings, 2 parallel"
            " maintenance workers, maintenance_work_mem sized to the graph as in a first build):",
            "",
            "| layout | rows in graph | build s | index MB |",
            "|---|---|---|---|",
            *(f"| {n} | {c:,} | {s:.1f} | {mb:.0f} |" for n, c, s, mb in build_rows),
        ]
    return lines
