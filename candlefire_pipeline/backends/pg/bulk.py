"""Writing rows into the chunks table: binary COPY, and the first full build of an empty table.

A first build runs inside the caller's transaction: the table is stripped to its columns
(TRUNCATE gives it a new file, so COPY FREEZE writes rows pre-frozen and, with wal_level=minimal,
without WAL), loaded, and only then indexed. A crash anywhere before COMMIT rolls all of it back
to the empty table, which the next run builds again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.base import RowProgress
from candlefire_pipeline.backends.pg import ddl as pg_ddl
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.copy import HEADER, TRAILER, copy_slices

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")
_DONE = object()

#: Bounds of the index builds' maintenance_work_mem. An HNSW graph that does not fit is built
#: on disk, far slower; but a parallel build allocates all of it as shared memory up front
#: (measured: 1GB cost ~2 s more than 256MB on a 15k-row build), so it is sized to the graph.
#: The cap admits 1M chunks at 384 dims (a ~2.1 GB vector graph): past it the rest of the rows
#: are inserted on disk one by one, which turns a minutes-long build into hours.
BUILD_MEMORY_MIN_MB = 64
BUILD_MEMORY_MAX_MB = 4096
#: In-memory HNSW graph bytes per row besides the vector: 2m neighbour slots of 16 bytes on
#: layer 0, upper layers, the element header (pgvector hnswbuild; measured index 121 MB at 62k).
GRAPH_ROW_OVERHEAD = 700
VALUE_BYTES = {"vector": 4.0, "halfvec": 2.0, "bit": 1 / 8}
#: Parallel workers per index build (HNSW and GIN build in parallel on PostgreSQL 18).
BUILD_WORKERS = 2
#: Rows per encoded COPY slice (~12 MB at 384 dims): the unit of encode/send overlap.
COPY_SLICE_ROWS = 4096
#: Encoded slices waiting to be sent: bounds the memory the encoder thread runs ahead with.
PREFETCH_SLICES = 2


def copy_rows(
    conn: psycopg.Connection,
    names: pg_sql.Names,
    rows: pa.Table,
    freeze: bool = False,
    progress: RowProgress | None = None,
) -> None:
    """Binary COPY of validated rows, the next slice encoded while this one is sent.

    Encoding and sending one after the other left the server idle while the client encoded
    (and the client idle while the server ingested): 0.82x the per-row documented COPY, which
    interleaves the two in 32 KB steps. Arrow and numpy release the GIL, so a thread overlaps them.
    `progress` gets the rows sent so far after each slice, on the caller's thread.
    """
    statement = pg_ddl.copy_into(names, freeze)
    slices = copy_slices(rows, COPY_SLICE_ROWS)
    with conn.cursor() as cur, cur.copy(statement) as copy:
        copy.write(HEADER)
        for done, block in prefetched(slices, PREFETCH_SLICES):
            copy.write(block)
            if progress is not None:
                progress(done)
        copy.write(TRAILER)


def prefetched(items: Iterable[T], depth: int) -> Iterator[T]:
    """items, produced by a thread running up to `depth` ahead; its exceptions re-raised here."""
    ahead: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                ahead.put(item)
        except BaseException as exc:  # handed to the consumer, raised there
            ahead.put(exc)
            return
        ahead.put(_DONE)

    worker = threading.Thread(target=produce, name="copy-encoder", daemon=True)
    worker.start()
    try:
        while (item := ahead.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                ahead.get_nowait()
            except queue.Empty:
                worker.join(0.01)


def strip_table(conn: psycopg.Connection, names: pg_sql.Names) -> None:
    """Empty the table into a new file and drop every index, the primary key's too."""
    conn.execute(sql.SQL("TRUNCATE {t}").format(t=names.ident()))
    for statement in pg_ddl.drop_indexes(names):
        conn.execute(statement)
    conn.execute(
        sql.SQL("ALTER TABLE {t} DROP CONSTRAINT IF EXISTS {k}").format(
            t=names.ident(), k=names.pkey
        )
    )


def restore_primary_key(conn: psycopg.Connection, names: pg_sql.Names) -> None:
    """One sorted build of the primary key instead of one btree insert per loaded row."""
    conn.execute(
        sql.SQL("ALTER TABLE {t} ADD CONSTRAINT {k} PRIMARY KEY (chunk_id)").format(
            t=names.ident(), k=names.pkey
        )
    )


def build_memory_mb(rows: int, dim: int, indexed_type: str) -> int:
    """maintenance_work_mem for building an HNSW graph of `rows` (1.5x its estimate, a power of
    two, within the bounds)."""
    per_row = dim * VALUE_BYTES[indexed_type] + GRAPH_ROW_OVERHEAD
    wanted = 1.5 * rows * per_row / 2**20
    size = BUILD_MEMORY_MIN_MB
    while size < wanted and size < BUILD_MEMORY_MAX_MB:
        size *= 2
    return min(size, BUILD_MEMORY_MAX_MB)


def use_build_resources(conn: psycopg.Connection, memory_mb: int = BUILD_MEMORY_MAX_MB) -> None:
    """Memory and parallel workers for the index builds, for this transaction only."""
    conn.execute(
        "SELECT set_config('maintenance_work_mem', %s, true), "
        "set_config('max_parallel_maintenance_workers', %s, true)",
        [f"{int(memory_mb)}MB", str(BUILD_WORKERS)],
    )
