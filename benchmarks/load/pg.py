"""The Postgres load methods the load benchmark compares, each into a fresh table of the store's
shape."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import psutil
import psycopg
import pyarrow as pa
from pgvector.psycopg import register_vector
from psycopg import sql

from benchmarks.load.rows import python_rows
from candlefire_pipeline.backends.common import embedding_matrix, rows_dim
from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg import ddl as pg_ddl
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.backend import PgVectorBackend

#: Column order of the baseline methods (the table's own order).
COLUMNS = (
    "chunk_id", "pmid", "section", "chunk_index", "title", "year", "doi", "citation_count",
    "entity_names", "mesh_terms", "has_full_text", "document", "content_hash", "paper_hash",
    "batch_key", "model_id", "embedding",
)  # fmt: skip


def copy_types(rows: pa.Table) -> list[str]:
    """Postgres type names for COPY.set_types, in COLUMNS order."""
    by_arrow = {pa.string(): "text", pa.int32(): "int4", pa.bool_(): "bool"}
    return [
        "vector" if name == "embedding" else by_arrow[rows.schema.field(name).type]
        for name in COLUMNS
    ]


#: pg_bulk functions timed in a first build -> the phase name they report.
TIMED_PHASES = {"copy_rows": "COPY FREEZE", "restore_primary_key": "primary key"}


class Timing(NamedTuple):
    """Wall seconds, this process's CPU seconds (client) and the server's CPU seconds of a load."""

    wall: float
    cpu: float
    server_cpu: float


def server_cpu_seconds(postmaster_pid: int | None) -> float:
    """CPU seconds of the postmaster and its live children (backends, WAL writer, checkpointer).

    CPU time barely moves with machine load, unlike wall time: it shows where a load's work is.
    """
    if postmaster_pid is None:
        return 0.0
    postmaster = psutil.Process(postmaster_pid)
    total = 0.0
    for process in (postmaster, *postmaster.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


class _Stopwatch:
    def __init__(self, postmaster_pid: int | None) -> None:
        self.pid = postmaster_pid
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.server = server_cpu_seconds(postmaster_pid)

    def stop(self) -> Timing:
        return Timing(
            time.perf_counter() - self.wall,
            time.process_time() - self.cpu,
            server_cpu_seconds(self.pid) - self.server,
        )


class TimedIndexBackend(PgVectorBackend):
    """PgVectorBackend whose first-build phases are timed, or whose indexes are skipped."""

    def __init__(self, dsn: str, table: str, build_indexes: bool, **kwargs) -> None:
        self.build_indexes = build_indexes
        self.index_seconds: dict[str, float] = {}
        super().__init__(dsn, table=table, **kwargs)

    def _create_indexes(self, dim: int) -> None:
        if not self.build_indexes:
            return
        for statement in self._index_statements(dim):
            text = statement.as_string(self.conn)
            kind = ("HNSW" if "hnsw" in text else "trigram GIN" if "gin" in text
                    else "seq btree" if text.endswith("(\"seq\")") else "btree")  # fmt: skip
            started = time.perf_counter()
            self.conn.execute(statement)
            self.index_seconds[kind] = time.perf_counter() - started  # last = the bulk build

    @contextmanager
    def timed_phases(self):
        """Time the COPY and the primary-key build of replace_papers (the real code, wrapped)."""
        originals = {name: getattr(pg_bulk, name) for name in TIMED_PHASES}

        def timed(name, call):
            def wrapper(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return call(*args, **kwargs)
                finally:
                    self.index_seconds[TIMED_PHASES[name]] = time.perf_counter() - started

            return wrapper

        for name, call in originals.items():
            setattr(pg_bulk, name, timed(name, call))
        try:
            yield
        finally:
            for name, call in originals.items():
                setattr(pg_bulk, name, call)


class PgLoads:
    """One connection to the benchmark server; each method loads into a table it then drops."""

    def __init__(self, dsn: str, rows: pa.Table, postmaster_pid: int | None = None) -> None:
        self.dsn = dsn
        self.postmaster_pid = postmaster_pid
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        register_vector(self.conn)
        self.dim = rows_dim(rows)
        self.types = copy_types(rows)
        self._serial = 0

    def _fresh_table(self, prefix: str) -> pg_sql.Names:
        self._serial += 1
        names = pg_sql.Names(f"{prefix}_{self._serial}")
        self.drop(names)
        self.conn.execute(pg_ddl.create_table(names, self.dim))
        return names

    def drop(self, names: pg_sql.Names) -> None:
        for ident in (names.ident(), names.meta):
            self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {t}").format(t=ident))

    def count(self, names: pg_sql.Names) -> int:
        query = sql.SQL("SELECT count(*) FROM {t}").format(t=names.ident())
        return self.conn.execute(query).fetchone()[0]

    def _insert_sql(self, names: pg_sql.Names) -> sql.Composed:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
        marks = sql.SQL(", ").join(sql.Placeholder() * len(COLUMNS))
        return sql.SQL("INSERT INTO {t} ({c}) VALUES ({v})").format(
            t=names.ident(), c=cols, v=marks
        )

    def executemany_insert(self, rows: pa.Table) -> tuple[Timing, pg_sql.Names]:
        """cursor.executemany of one INSERT per row, in one transaction (Python rows prebuilt)."""
        names = self._fresh_table("load_insert")
        data = python_rows(rows, COLUMNS)
        clock = _Stopwatch(self.postmaster_pid)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(self._insert_sql(names), data)
        return clock.stop(), names

    def documented_copy(self, rows: pa.Table) -> tuple[Timing, pg_sql.Names]:
        """pgvector-python's documented binary COPY: set_types, then one write_row per row."""
        names = self._fresh_table("load_copy")
        data = python_rows(rows, COLUMNS)
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
        statement = sql.SQL("COPY {t} ({c}) FROM STDIN WITH (FORMAT BINARY)").format(
            t=names.ident(), c=cols
        )
        clock = _Stopwatch(self.postmaster_pid)
        with self.conn.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(self.types)
            for row in data:
                copy.write_row(row)
        return clock.stop(), names

    def project_bulk(
        self, rows: pa.Table, build_indexes: bool = False, **settings
    ) -> tuple[Timing, pg_sql.Names, TimedIndexBackend]:
        """PgVectorBackend.replace_papers into an empty table (from the Arrow table)."""
        self._serial += 1
        backend = TimedIndexBackend(
            self.dsn, f"load_project_{self._serial}", build_indexes, **settings
        )
        backend.reset()
        with backend.timed_phases():
            clock = _Stopwatch(self.postmaster_pid)
            backend.replace_papers(rows)
            timing = clock.stop()
        return timing, backend.names, backend

    def same_vector(self, names: pg_sql.Names, rows: pa.Table, row: int) -> bool:
        """Whether the stored embedding of rows[row] equals the source vector bit for bit."""
        query = sql.SQL("SELECT embedding FROM {t} WHERE chunk_id = %s").format(t=names.ident())
        stored = self.conn.execute(query, [rows["chunk_id"][row].as_py()]).fetchone()[0]
        source = embedding_matrix(rows.slice(row, 1))[0]
        return bool(np.array_equal(stored.to_numpy(), source))  # pgvector 0.5 returns Vector

    def close(self) -> None:
        self.conn.close()
