"""What the term cache holds, for `candlefire status`, `candlefire maintain` and the asset."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import schema


@dataclass(frozen=True)
class CacheSummary:
    entries: int
    keyword: int
    entity: int
    #: keyword entries kept for grounding only (no ranked list yet)
    grounding_only: int
    #: lists made by an HNSW walk (entity names on a large table, variants held by many chunks)
    approximate: int
    bytes: int
    #: requests answered from kept entries / entries computed (kept entries only)
    hits: int
    fills: int
    #: the cache describes the table's content (false after a write that bypassed it)
    valid: bool

    @property
    def hit_rate(self) -> float:
        looked = self.hits + self.fills
        return self.hits / looked if looked else 0.0

    @property
    def bytes_per_entry(self) -> float:
        return self.bytes / self.entries if self.entries else 0.0

    def describe(self) -> str:
        state = "" if self.valid else ", OUT OF DATE (cleared by the next write)"
        return (
            f"term cache {self.entries:,} entries ({self.keyword:,} keyword, {self.entity:,} "
            f"entity), {self.bytes / 2**20:.1f} MB, hit rate {self.hit_rate:.2f}{state}"
        )

    def metadata(self) -> dict[str, object]:
        return {
            "term_cache_entries": self.entries,
            "term_cache_mb": round(self.bytes / 2**20, 2),
            "term_cache_hit_rate": round(self.hit_rate, 4),
            "term_cache_approximate": self.approximate,
        }


def summarize(conn: psycopg.Connection, names: Names) -> CacheSummary | None:
    """The cache's figures, or None when the table has none (never written since the upgrade)."""
    if not schema.exists(conn, names):
        return None
    terms = schema.terms_table(names)
    row = conn.execute(
        sql.SQL(
            """SELECT count(*), count(*) FILTER (WHERE kind = 'keyword'),
                count(*) FILTER (WHERE kind = 'entity'), count(*) FILTER (WHERE NOT listed),
                count(*) FILTER (WHERE approximate), pg_total_relation_size(%s::regclass),
                coalesce(sum(hits), 0), coalesce(sum(fills), 0), {valid}
            FROM {e}"""
        ).format(e=terms, valid=schema.valid_condition(names)),
        [terms.as_string(conn)],
    ).fetchone()
    return CacheSummary(*(int(v) for v in row[:8]), valid=bool(row[8]))
