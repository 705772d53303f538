"""How the pgvector store indexes its vectors, and the per-stage ANN effort of each query.

The table always stores float32 `vector`s, so every similarity a query returns is the exact
float32 cosine (what Chroma and the oracle compute). The layout chooses the ANN index: HNSW over
the vectors (`vector`), over their half-precision cast (`halfvec`: half the index bytes), or over
their binary quantization (`binary`: 1/32); the compressed indexes fetch more candidates than
asked and re-rank them by exact cosine. The layout is part of a table's contract like its model:
read back from the catalog, a table built one way is never queried as the other. The effort
(hnsw.ef_search per retrieval stage, iterative scan) is session state, sent only when it changes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.base import DimensionMismatchError

log = logging.getLogger(__name__)

#: pgvector's hnsw.ef_search ceiling.
MAX_EF_SEARCH = 1000
#: Candidates per row kept from a half-precision index walk: float16 moves a cosine by ~1e-4,
#: so the exact top n sit within the first 2n half-precision ones.
HALFVEC_CANDIDATES = 2


@dataclass(frozen=True)
class AnnParams:
    """How the store keeps and searches its vectors; the app validates and maps its settings.

    vector_type: "vector" | "halfvec" (HNSW over the float16 cast, 2n candidates re-ranked);
    quantization: "none" | "binary" (HNSW over binary_quantize(), then n x rerank_factor
    candidates re-ranked by exact cosine; exclusive with halfvec); ef_search /
    ef_search_entities: hnsw.ef_search of the semantic stage and of the entity fan-out;
    iterative_scan: "off" | "relaxed_order" | "strict_order" (pgvector >= 0.8); full_scan_rows:
    a table of at most this many rows is searched exactly, without a graph walk (0 = never).
    """

    vector_type: str = "vector"
    quantization: str = "none"
    rerank_factor: int = 10
    ef_search: int = 1000
    ef_search_entities: int = 1000
    iterative_scan: str = "relaxed_order"
    max_scan_tuples: int = 20_000
    full_scan_rows: int = 5_000


class StoreLayoutError(DimensionMismatchError):
    """The table stores or indexes its vectors differently from the configured layout."""


@dataclass(frozen=True)
class Layout:
    """The ANN index of the embedding column: its precision and quantization."""

    #: precision the HNSW index is built over: "vector" (float32) or "halfvec" (float16)
    vector_type: str = "vector"
    #: "binary": HNSW over binary_quantize(embedding) with Hamming distance
    quantization: str = "none"

    @classmethod
    def of(cls, ann: AnnParams) -> Layout:
        return cls(ann.vector_type, ann.quantization)

    @property
    def reranked(self) -> bool:
        """Whether the index walk ranks by an approximation that exact cosine re-ranks."""
        return self.quantization == "binary" or self.vector_type == "halfvec"

    def candidates(self, n: int, rerank_factor: int) -> int:
        """Rows an index walk fetches to return n after the exact re-rank."""
        if self.quantization == "binary":
            return n * rerank_factor
        return n * HALFVEC_CANDIDATES if self.vector_type == "halfvec" else n

    def column_type(self, dim: int) -> sql.Composable:
        return sql.SQL("vector({})").format(sql.Literal(int(dim)))

    def ann_key(self, column: sql.Composable, dim: int) -> sql.Composable:
        """What the HNSW index orders by: the vector, its float16 cast, or its bits."""
        if self.quantization == "binary":
            return sql.SQL("(binary_quantize({})::bit({}))").format(column, sql.Literal(int(dim)))
        if self.vector_type == "halfvec":
            return sql.SQL("(({})::halfvec({}))").format(column, sql.Literal(int(dim)))
        return column

    def ann_distance(self, column: sql.Composable, query: sql.Composable, dim: int):
        """The ORDER BY of the ANN walk (the index's key and operator)."""
        if self.quantization == "binary":
            return sql.SQL("{} <~> binary_quantize({})").format(self.ann_key(column, dim), query)
        return sql.SQL("{} <=> {}").format(self.ann_key(column, dim), self.ann_key(query, dim))

    def index_method(self, dim: int) -> sql.Composable:
        """`USING hnsw (...)` body of the ANN index."""
        key = self.ann_key(sql.Identifier("embedding"), dim)
        binary = self.quantization == "binary"
        opclass = "bit_hamming_ops" if binary else f"{self.vector_type}_cosine_ops"
        return sql.SQL("{} {}").format(key, sql.SQL(opclass))

    @property
    def indexed_type(self) -> str:
        """The value type the HNSW graph stores (its memory estimate)."""
        return "bit" if self.quantization == "binary" else self.vector_type

    def describe(self) -> str:
        if self.quantization == "binary":
            return "a binary-quantized HNSW index"
        if self.vector_type == "vector":
            return "an HNSW index"
        if self.vector_type == "halfvec":
            return "a half-precision HNSW index"
        return f"{self.vector_type} (rebuild needed)"


#: float32 vectors, HNSW over them: the default layout.
PLAIN = Layout()

#: Catalog facts of a table: its embedding column type and its ANN index definition.
LAYOUT_QUERY = """
    SELECT format_type(a.atttypid, a.atttypmod),
           (SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
            WHERE i.indexrelid = to_regclass(%s))
    FROM pg_attribute a
    WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding' AND NOT a.attisdropped
"""


def stored_layout(conn: psycopg.Connection, table: str, index: str) -> Layout | None:
    """The layout a table was built with, or None when the table does not exist.

    Read from the ANN index; with the index missing (dropped by hand) the quantization is
    "unknown" and any configured layout is accepted (the next write rebuilds the index). A table
    whose column is not float32 `vector` (a halfvec column of an earlier release) matches none.
    """
    row = conn.execute(LAYOUT_QUERY, [index, table]).fetchone()
    if row is None:
        return None
    column_type, index_def = row
    column = column_type.split("(", 1)[0]
    if column != "vector":
        return Layout(f"{column} column", "none")
    if index_def is None:
        return Layout("vector", "unknown")
    if "binary_quantize" in index_def:
        return Layout("vector", "binary")
    return Layout("halfvec" if "halfvec" in index_def else "vector", "none")


def check_layout(stored: Layout | None, wanted: Layout, table: str) -> None:
    """StoreLayoutError when the table was built with another ANN index than configured."""
    if stored is None:
        return
    if stored.quantization == "unknown" and stored.vector_type == "vector":
        return
    if stored == wanted:
        return
    raise StoreLayoutError(
        f"table {table!r} was built with {stored.describe()} but {wanted.describe()} is "
        f"configured (CANDLEFIRE_PG_VECTOR_TYPE={wanted.vector_type}, CANDLEFIRE_PG_QUANTIZATION="
        f"{wanted.quantization}); rebuild the store (reset it and re-apply every batch) to switch"
    )


@dataclass(frozen=True)
class StageEffort:
    """Session settings one ANN query runs with."""

    ef_search: int
    iterative_scan: str
    max_scan_tuples: int

    def gucs(self) -> dict[str, str]:
        return {
            "hnsw.ef_search": str(self.ef_search),
            "hnsw.iterative_scan": self.iterative_scan,
            "hnsw.max_scan_tuples": str(self.max_scan_tuples),
        }


def stage_effort(ann: AnnParams, stage: str, candidates: int) -> StageEffort:
    """The effort of a stage; a walk for `candidates` rows explores at least that many."""
    ef = ann.ef_search_entities if stage == "entities" else ann.ef_search
    return StageEffort(min(MAX_EF_SEARCH, max(ef, candidates)), ann.iterative_scan,
                       ann.max_scan_tuples)  # fmt: skip


class RowEstimate:
    """How many chunks a table holds, from the statistics collector (no scan), re-read at most
    every MAX_AGE seconds and after this process writes: it only picks exact scan vs HNSW."""

    MAX_AGE = 30.0

    def __init__(self) -> None:
        self._rows: int | None = None
        self._read_at = 0.0

    def forget(self) -> None:
        self._rows = None

    def estimate(self, conn: psycopg.Connection, names) -> int:
        """The table's row count, at most MAX_AGE seconds old."""
        now = time.monotonic()
        if self._rows is None or now - self._read_at > self.MAX_AGE:
            self._rows, self._read_at = _live_rows(conn, names.ident()), now
        return self._rows


def _live_rows(conn: psycopg.Connection, table: sql.Identifier) -> int:
    """Live rows per the statistics collector, or the planner's estimate, or a count."""
    row = conn.execute(
        "SELECT s.n_live_tup, c.reltuples FROM pg_class c "
        "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = to_regclass(%s)",
        [table.as_string(conn)],
    ).fetchone()
    if row is None:
        return 0
    live, planner = row
    if not live and planner < 0:  # never counted (statistics off, no ANALYZE yet)
        return int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0])
    return int(max(live or 0, planner))


class SessionSettings:
    """The hnsw.* values a connection has; set_config is sent only for the ones that change."""

    def __init__(self) -> None:
        self._applied: dict[str, str] = {}
        self._unsupported: set[str] = set()

    def forget(self) -> None:
        """After a reconnect: the new session has server defaults."""
        self._applied.clear()

    def apply(self, conn: psycopg.Connection, wanted: dict[str, str]) -> None:
        changed = {
            name: value
            for name, value in wanted.items()
            if self._applied.get(name) != value and name not in self._unsupported
        }
        if not changed:
            return
        calls = sql.SQL(", ").join(
            sql.SQL("set_config({}, {}, false)").format(sql.Literal(n), sql.Literal(v))
            for n, v in changed.items()
        )
        try:
            conn.execute(sql.SQL("SELECT {}").format(calls))
        except psycopg.OperationalError:
            raise
        except psycopg.Error:
            optional = {n for n in changed if n != "hnsw.ef_search"}
            if not optional:
                raise
            # pgvector < 0.8 has no iterative scan: run without it rather than fail every query
            log.warning("pgvector lacks %s: filtered ANN queries may return fewer than n rows",
                        ", ".join(sorted(optional)))  # fmt: skip
            self._unsupported.update(optional)
            self.apply(conn, wanted)
            return
        self._applied.update(changed)
