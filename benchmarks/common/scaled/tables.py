"""pgvector at any corpus size: a first build in phases (the product's bulk path, fed in slices),
the ANN index of each layout swapped in on the same table, sizes, and the server's memory.

The build follows PgVectorBackend._bulk_load: in one transaction the table is stripped of its
indexes, COPY FREEZE writes the rows, then the primary key, the (pmid, chunk_index) btree and the
trigram GIN are built; each layout's HNSW index is then built on its own (the heap and the other
indexes are the same for every layout: the column is always float32), with maintenance_work_mem
sized by the product's pg_bulk.build_memory_mb and its parallel workers.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
from psycopg import sql

from benchmarks.common.scaled.corpus import ScaleCorpus, build_corpus
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg import ddl as pg_ddl
from candlefire_pipeline.backends.pg import phrase as pg_phrase
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams, Layout
from candlefire_pipeline.backends.pg.terms.cache import CacheParams

log = logging.getLogger(__name__)

#: The ANN layouts of the cost curve (each an HNSW index over the same float32 column).
LAYOUTS = {
    "vector": AnnParams(),
    "halfvec": AnnParams(vector_type="halfvec"),
    "binary": AnnParams(quantization="binary"),
}


class ServerMemory:
    """Peak proportional set size (PSS: shared pages split among the processes mapping them) of
    a Postgres server, postmaster and every backend and worker, sampled every `every` seconds."""

    def __init__(self, data_dir: Path, every: float = 0.5) -> None:
        self.pid = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-memory", daemon=True)
        self._thread.start()

    def current(self) -> int:
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for process in processes:
            try:
                total += process.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self.current())

    def phase_peak(self) -> int:
        """The peak since the last call (then starts a new phase)."""
        peak, self.peak = max(self.peak, self.current()), 0
        return peak

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class PgBuild:
    """A first build's phases (seconds), sizes (bytes) and the server's peak memory (bytes)."""

    rows: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    peak_memory: dict[str, int] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def table_name(size: int) -> str:
    return f"scale_{size}"


#: The exact reference's store: nothing kept, every keyword variant's holders ranked exactly
#: (found through the trigram index alone).
EXACT_SUBSTRINGS = CacheParams(enabled=False, keyword_walk="off", phrase_index=False)


def open_layout(
    dsn: str, table: str, name: str, cache: CacheParams | None = None, **effort
) -> PgVectorBackend:
    """The table as the product opens it with `name`'s layout (and optional effort changes)."""
    ann = replace(LAYOUTS[name], **effort)
    # as the product maps its settings: the entity stage's effort makes the kept entity lists
    cache = cache or CacheParams(fill_ef=ann.ef_search_entities)
    return build_backend("pgvector", dsn, table=table, ann=ann, cache=cache)


def load_table(dsn: str, embedder, size: int, memory: ServerMemory) -> tuple[ScaleCorpus, PgBuild]:
    """Generate the corpus and first-build its table (every index but the ANN one), timed."""
    store = open_layout(dsn, table_name(size), "vector")
    store.reset()
    store.ensure_schema(embedder.model_id, embedder.dim)
    build, conn, names = PgBuild(), store.conn, store.names
    conn.add_notice_handler(lambda d: build.notices.append(d.message_primary or ""))
    memory.phase_peak()
    with conn.transaction():
        pg_bulk.strip_table(conn, names)
        copy_s = 0.0

        def copy(rows) -> None:
            nonlocal copy_s
            started = time.perf_counter()
            pg_bulk.copy_rows(conn, names, rows, freeze=True)
            copy_s += time.perf_counter() - started

        corpus = build_corpus(embedder, size, consume=copy)
        build.seconds["COPY"] = copy_s
        build.peak_memory["COPY"] = memory.phase_peak()
        _timed(build, "primary key", lambda: pg_bulk.restore_primary_key(conn, names))
        # as a first build of the default layout sizes it (pg_bulk.build_memory_mb)
        pg_bulk.use_build_resources(conn, pg_bulk.build_memory_mb(size, embedder.dim, "vector"))
        btree, trigram, _, seq = pg_ddl.create_indexes(
            names, store.hnsw_m, store.hnsw_ef_construction
        )
        _timed(build, "btree", lambda: (conn.execute(btree), conn.execute(seq)))
        _timed(build, "trigram GIN", lambda: conn.execute(trigram))
        build.peak_memory["indexes"] = memory.phase_peak()
    conn.execute(sql.SQL("ANALYZE {}").format(names.ident()))
    store.clear_term_cache("the benchmark's first build")  # COPY above bypassed the store
    # as the store asset does after a write: beside serving, once the table is committed
    _timed(build, "phrase GIN", store.build_phrase_index)
    build.peak_memory["indexes"] = max(build.peak_memory["indexes"], memory.phase_peak())
    build.rows = size
    build.bytes = relation_bytes(store)
    store.close()
    return corpus, build


def _timed(build: PgBuild, phase: str, call) -> None:
    started = time.perf_counter()
    call()
    build.seconds[phase] = time.perf_counter() - started
    log.info("%s: %.1f s", phase, build.seconds[phase])


def build_ann(dsn: str, size: int, layout: str, memory: ServerMemory) -> PgBuild:
    """Drop the ANN index and build `layout`'s; seconds, bytes, peak memory, pgvector notices."""
    store = open_layout(dsn, table_name(size), layout)
    build, conn, names = PgBuild(rows=size), store.conn, store.names
    conn.add_notice_handler(lambda d: build.notices.append(d.message_primary or ""))
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(names.hnsw))
    dim = int(conn.execute(sql.SQL("SELECT dim FROM {}").format(names.meta)).fetchone()[0])
    shape = Layout.of(LAYOUTS[layout])
    statement = pg_ddl.create_indexes(names, store.hnsw_m, store.hnsw_ef_construction, shape, dim)[
        2
    ]  # the HNSW index
    memory_mb = pg_bulk.build_memory_mb(size, dim, shape.indexed_type)
    memory.phase_peak()
    with conn.transaction():
        pg_bulk.use_build_resources(conn, memory_mb)
        _timed(build, "HNSW", lambda: conn.execute(statement))
    build.peak_memory["HNSW"] = memory.phase_peak()
    build.bytes = relation_bytes(store)
    build.notices.insert(0, f"maintenance_work_mem {memory_mb} MB")
    store.close()
    return build


def relation_bytes(store: PgVectorBackend) -> dict[str, int]:
    """Heap (+TOAST), and each index that exists, in bytes."""
    conn, names = store.conn, store.names
    wanted = {"table": names.ident(), "primary key": names.pkey, "btree": names.btree,
              "trigram GIN": names.trgm, "HNSW": names.hnsw,
              "phrase GIN": pg_phrase.index_name(names, store.substring_mode)}  # fmt: skip
    out = {}
    for label, ident in wanted.items():
        name = ident.as_string(conn)
        size = conn.execute(
            "SELECT CASE WHEN to_regclass(%s) IS NULL THEN NULL"
            " WHEN %s = 'table' THEN pg_table_size(to_regclass(%s))"
            " ELSE pg_relation_size(to_regclass(%s)) END",
            [name, label, name, name],
        ).fetchone()[0]
        if size is not None:
            out[label] = int(size)
    return out
