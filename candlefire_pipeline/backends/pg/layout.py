"""How the pgvector store keeps its vectors, and the per-stage ANN effort of each query.

The layout (column type vector | halfvec, ANN index plain | binary-quantized) is part of a table's
contract like its model: it is read back from the catalog, and a table built one way is never
queried as the other. The effort (hnsw.ef_search per retrieval stage, iterative scan) is session
state, sent only when it changes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.base import DimensionMismatchError

log = logging.getLogger(__name__)

#: pgvector's hnsw.ef_search ceiling.
MAX_EF_SEARCH = 1000


@dataclass(frozen=True)
class AnnParams:
    """How the store keeps and searches its vectors; the app validates and maps its settings.

    vector_type: "vector" | "halfvec"; quantization: "none" | "binary" (HNSW over
    binary_quantize(), then n x rerank_factor candidates re-ranked by exact cosine); ef_search /
    ef_search_entities: hnsw.ef_search of the semantic stage and of the entity fan-out;
    iterative_scan: "off" | "relaxed_order" | "strict_order" (pgvector >= 0.8).
    """

    vector_type: str = "vector"
    quantization: str = "none"
    rerank_factor: int = 10
    ef_search: int = 200
    ef_search_entities: int = 40
    iterative_scan: str = "relaxed_order"
    max_scan_tuples: int = 20_000


class StoreLayoutError(DimensionMismatchError):
    """The table stores or indexes its vectors differently from the configured layout."""


@dataclass(frozen=True)
class Layout:
    """Storage type and ANN index of the embedding column."""

    vector_type: str = "vector"
    quantization: str = "none"

    @classmethod
    def of(cls, ann: AnnParams) -> Layout:
        return cls(ann.vector_type, ann.quantization)

    def column_type(self, dim: int) -> sql.Composable:
        return sql.SQL("{}({})").format(sql.SQL(self.vector_type), sql.Literal(int(dim)))

    def query_vector(self, expression: sql.Composable) -> sql.Composable:
        """A query vector (bound as pgvector `vector`) in the stored type."""
        if self.vector_type == "vector":
            return expression
        return sql.SQL("({})::halfvec").format(expression)

    def ann_key(self, column: sql.Composable, dim: int) -> sql.Composable:
        """What the HNSW index orders by: the vector, or its binary quantization."""
        if self.quantization == "none":
            return column
        return sql.SQL("(binary_quantize({})::bit({}))").format(column, sql.Literal(int(dim)))

    def ann_distance(self, column: sql.Composable, query: sql.Composable, dim: int):
        """The ORDER BY of the ANN walk: cosine distance, or Hamming distance of the bits."""
        if self.quantization == "none":
            return sql.SQL("{} <=> {}").format(column, query)
        return sql.SQL("{} <~> binary_quantize({})").format(self.ann_key(column, dim), query)

    def index_method(self, dim: int) -> sql.Composable:
        """`USING hnsw (...)` body of the ANN index."""
        key = self.ann_key(sql.Identifier("embedding"), dim)
        binary = self.quantization == "binary"
        opclass = "bit_hamming_ops" if binary else f"{self.vector_type}_cosine_ops"
        return sql.SQL("{} {}").format(key, sql.SQL(opclass))

    def describe(self) -> str:
        index = "binary-quantized HNSW" if self.quantization == "binary" else "HNSW"
        return f"{self.vector_type} with {index}"


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

    The quantization is read from the ANN index; with the index missing (dropped by hand) it is
    "unknown" and any configured quantization is accepted (the next write rebuilds the index).
    """
    row = conn.execute(LAYOUT_QUERY, [index, table]).fetchone()
    if row is None:
        return None
    column_type, index_def = row
    vector_type = column_type.split("(", 1)[0]
    if index_def is None:
        quantization = "unknown"
    else:
        quantization = "binary" if "binary_quantize" in index_def else "none"
    return Layout(vector_type, quantization)


def check_layout(stored: Layout | None, wanted: Layout, table: str) -> None:
    """StoreLayoutError when the table holds another vector type or ANN index than configured."""
    if stored is None:
        return
    same_type = stored.vector_type == wanted.vector_type
    same_index = stored.quantization in ("unknown", wanted.quantization)
    if same_type and same_index:
        return
    raise StoreLayoutError(
        f"table {table!r} was built as {stored.describe()} but {wanted.describe()} is configured"
        f" (CANDLEFIRE_PG_VECTOR_TYPE={wanted.vector_type}, CANDLEFIRE_PG_QUANTIZATION="
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
