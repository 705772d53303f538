"""Index health of a pgvector table: sizes, dead tuples, (auto)vacuum, a bloat estimate.

Postgres has no bloat figure for HNSW or GIN (pgstattuple covers btree). The estimate here is
measured on the server itself: the same index definition is built on a random sample of the
table's live rows in a temporary table and scaled to the live rows; bloat = bytes / that
(estimate_fresh_sizes says how close it comes). Nothing here blocks reads or writes: statistics
views, a temp table, and `REINDEX INDEX CONCURRENTLY` / `VACUUM` (neither takes a lock that
stops SELECT or INSERT).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

#: Live rows copied into the sample table a fresh-size estimate is built on.
SAMPLE_ROWS = 5_000

TABLE_SQL = """
SELECT s.n_live_tup, s.n_dead_tup, pg_relation_size(c.oid), s.last_vacuum, s.last_autovacuum,
       s.vacuum_count, s.autovacuum_count, s.last_analyze, s.last_autoanalyze,
       s.n_mod_since_analyze
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = %s::regclass
"""
INDEX_SQL = """
SELECT i.indexrelid::regclass::text, a.amname, pg_relation_size(i.indexrelid), i.indisvalid,
       pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = %s::regclass ORDER BY 1
"""
CREATE_INDEX = re.compile(r"^CREATE INDEX \S+ ON \S+ USING ")


@dataclass
class IndexHealth:
    name: str
    method: str  # hnsw | gin | btree
    bytes: int
    valid: bool
    definition: str = field(repr=False, default="")
    fresh_bytes: int | None = None  # estimated size of a fresh build over the live rows

    @property
    def bloat(self) -> float | None:
        """bytes / the fresh-build estimate (1.0 = as built); None when not estimated."""
        return self.bytes / self.fresh_bytes if self.fresh_bytes else None


@dataclass
class TableHealth:
    table: str
    live_tuples: int
    dead_tuples: int
    heap_bytes: int
    last_vacuum: datetime | None
    last_autovacuum: datetime | None
    vacuum_count: int
    autovacuum_count: int
    last_analyze: datetime | None
    last_autoanalyze: datetime | None
    modified_since_analyze: int
    indexes: list[IndexHealth] = field(default_factory=list)

    @property
    def dead_ratio(self) -> float:
        return self.dead_tuples / self.live_tuples if self.live_tuples else 0.0

    def index(self, method: str) -> IndexHealth | None:
        return next((i for i in self.indexes if i.method == method), None)

    def trigram_index(self) -> IndexHealth | None:
        """The trigram GIN (the table's other GIN is the phrase index)."""
        return next((i for i in self.indexes if "gin_trgm_ops" in i.definition), None)

    def to_dict(self) -> dict:
        out = asdict(self)
        for i, index in enumerate(self.indexes):
            out["indexes"][i]["bloat"] = index.bloat
            out["indexes"][i].pop("definition")
        return out


def table_health(conn: psycopg.Connection, table: str) -> TableHealth | None:
    """The table's statistics and indexes (None when the table does not exist)."""
    if conn.execute("SELECT to_regclass(%s)", [table]).fetchone()[0] is None:
        return None
    row = conn.execute(TABLE_SQL, [table]).fetchone()
    health = TableHealth(table, *[0 if v is None and i < 3 else v for i, v in enumerate(row)])
    health.indexes = [IndexHealth(*r) for r in conn.execute(INDEX_SQL, [table]).fetchall()]
    return health


def estimate_fresh_sizes(
    conn: psycopg.Connection,
    health: TableHealth,
    methods=("hnsw", "gin"),
    sample: int = SAMPLE_ROWS,
    only: IndexHealth | None = None,
) -> None:
    """Fill fresh_bytes of the table's `methods` indexes from builds on a random sample of its
    live rows (in a temp table with the table's storage parameters). HNSW tuples have a fixed
    size per element: scaled linearly (measured: 1.00x a real fresh build at 8k and 30k rows).
    GIN is fitted as size ~ rows^a on two sample sizes and extrapolated; it still reads a real
    fresh build 1.12x (8k) to 1.19x (30k) high, so a GIN is rebuilt a little early. `only`:
    that index alone."""
    wanted = [i for i in health.indexes if i.method in methods and CREATE_INDEX.match(i.definition)
              and (only is None or i is only)]  # fmt: skip
    if min(health.live_tuples, sample) < 200 or not wanted:
        return  # too few rows for a per-row figure; nothing to estimate
    share = min(100.0, 110.0 * sample / health.live_tuples)
    options = _storage_options(conn, health.table)
    with conn.transaction():
        conn.execute(sql.SQL(
            "CREATE TEMP TABLE candlefire_sample {} ON COMMIT DROP AS"
            " SELECT * FROM {} TABLESAMPLE BERNOULLI (%s) LIMIT %s"
        ).format(options, sql.Identifier(health.table)), [share, sample])  # fmt: skip
        full = conn.execute("SELECT count(*) FROM candlefire_sample").fetchone()[0]
        conn.execute(sql.SQL(
            "CREATE TEMP TABLE candlefire_half {} ON COMMIT DROP AS"
            " SELECT * FROM candlefire_sample LIMIT %s"
        ).format(options), [full // 2])  # fmt: skip
        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        for index in wanted:
            if index.method == "hnsw":  # fixed-size tuples per element: linear in the rows
                size = _built_size(conn, index, "candlefire_sample")
                index.fresh_bytes = round(size * health.live_tuples / full)
                continue
            sizes = [_built_size(conn, index, t) for t in ("candlefire_half", "candlefire_sample")]
            index.fresh_bytes = _extrapolate((full // 2, full), sizes, health.live_tuples)


def _storage_options(conn: psycopg.Connection, table: str) -> sql.Composable:
    """WITH (...) of the table's storage parameters. They shape the index too: GIN posting
    lists store heap TIDs as deltas, so rows per heap page (toast_tuple_target keeps ~3 KB rows
    inline here) change its size; a sample without them read a fresh GIN 1.25x small."""
    options = conn.execute(
        "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [table]
    ).fetchone()[0]
    if not options:
        return sql.SQL("")
    pairs = [option.split("=", 1) for option in options]
    return sql.SQL("WITH ({})").format(sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in pairs
    ))  # fmt: skip


def _built_size(conn: psycopg.Connection, index: IndexHealth, table: str) -> int:
    built = CREATE_INDEX.sub(
        f"CREATE INDEX candlefire_sample_index ON {table} USING ", index.definition
    )
    conn.execute(built)
    size = conn.execute("SELECT pg_relation_size('candlefire_sample_index')").fetchone()[0]
    conn.execute("DROP INDEX candlefire_sample_index")
    return size


def _extrapolate(rows: tuple[int, int], sizes: list[int], live: int) -> int | None:
    """size(live) from size ~ rows^a through two points (a kept within 0.5 .. 1.5)."""
    (n1, n2), (s1, s2) = rows, sizes
    if not (n1 and n2 > n1 and s1 and s2):
        return None
    exponent = min(1.5, max(0.5, math.log(s2 / s1) / math.log(n2 / n1)))
    return round(s2 * (live / n2) ** exponent)


def flush_gin_pending(conn: psycopg.Connection, index: str) -> None:
    """Merge the GIN index's pending list into its tree (what VACUUM would do later).

    GIN's fastupdate queues inserted entries in a pending list (up to gin_pending_list_limit,
    4 MB) that every search scans linearly; after a batch of a few thousand chunks it held
    enough trigram entries to make the keyword stage 20x slower until autovacuum or
    autoanalyze ran (churn soak, docs/BENCHMARKS.md). The writer pays that merge once instead.
    """
    try:
        conn.execute("SELECT gin_clean_pending_list(%s::regclass)", [index])
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedTable) as exc:
        log.info("GIN pending list of %s not flushed: %s", index, exc)


def reindex_concurrently(conn: psycopg.Connection, index: str) -> None:
    """Rebuild one index beside the old one; reads and writes go on (autocommit connection)."""
    conn.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.Identifier(index)))


def vacuum(conn: psycopg.Connection, table: str) -> None:
    """VACUUM (ANALYZE): frees dead tuples in the heap and every index; no blocking lock."""
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
