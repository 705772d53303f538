"""Postgres + pgvector backend: HNSW cosine ANN, trigram-indexed LIKE/ILIKE, binary COPY."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import RowProgress
from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg import copy as pg_copy
from candlefire_pipeline.backends.pg import ddl as pg_ddl
from candlefire_pipeline.backends.pg import disk as pg_disk
from candlefire_pipeline.backends.pg import health as pg_health
from candlefire_pipeline.backends.pg import phrase as pg_phrase
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.connect import open_connection
from candlefire_pipeline.backends.pg.insertion_order import ensure_insertion_order
from candlefire_pipeline.backends.pg.layout import (
    AnnParams,
    Layout,
    RowEstimate,
    SessionSettings,
    check_layout,
    stored_layout,
)
from candlefire_pipeline.backends.pg.reads import PgReads
from candlefire_pipeline.backends.pg.terms import ahead as terms_ahead
from candlefire_pipeline.backends.pg.terms import schema as terms_schema
from candlefire_pipeline.backends.pg.terms import upkeep as terms_upkeep
from candlefire_pipeline.backends.pg.terms.cache import CacheParams, TermCache
from candlefire_pipeline.backends.pg.terms.sample import DocumentSample
from candlefire_pipeline.redact import redact_dsn

if TYPE_CHECKING:  # rows tables come with the writes: the app's read path never loads pyarrow
    import pyarrow as pa

log = logging.getLogger(__name__)

#: A first load into an empty table at least this large builds the search indexes afterwards.
BULK_REBUILD_ROWS = 5_000


class PgVectorBackend(PgReads):
    """Chunks in one Postgres table; replace_papers is one transaction per call."""

    name = "pgvector"

    def __init__(
        self,
        dsn: str,
        table: str = "chunks",
        substring_mode: str = "like",
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 128,
        ann: AnnParams | None = None,
        bulk_rebuild_rows: int = BULK_REBUILD_ROWS,
        cache: CacheParams | None = None,
    ) -> None:
        self.names = pg_sql.Names(table)
        self.substring_mode = common.check_substring_mode(substring_mode)
        self.hnsw_m, self.hnsw_ef_construction = hnsw_m, hnsw_ef_construction
        if ann is not None and not isinstance(ann, AnnParams):
            # Settings.pg_ann lacks the per-stage efforts: factory.pg_ann_params adds them
            raise TypeError(
                f"ann must be AnnParams (factory.pg_ann_params), got {type(ann).__name__}"
            )
        self.ann = ann or AnnParams()
        self.layout = Layout.of(self.ann)
        self.bulk_rebuild_rows = bulk_rebuild_rows
        self._dsn = dsn
        self._session = SessionSettings()
        #: a search's effort (session settings) and its statement go together: threads sharing
        #: this backend would otherwise run one stage's query with another stage's ef_search
        self._searching = threading.Lock()
        self._rows = RowEstimate()
        self.document_sample = DocumentSample()
        self._conn = self._open()
        #: The model once the table is known to exist (and its layout checked); reads skip the
        #: catalog lookups then.
        self._ready: tuple[str, int] | None = None
        #: keyword, entity and grounding answers kept by text (backends/pg/terms)
        self.terms = TermCache(self, cache or CacheParams())
        #: what the last write did to the term cache, and every write of this object summed
        self.last_upkeep: terms_upkeep.UpkeepReport | None = None
        self.upkeep_total = terms_upkeep.UpkeepReport()

    def _full_disk(self):
        """A write failing on a full disk raises StoreFullError (rolled back whole)."""
        return pg_disk.full_disk_as_store_full(self._dsn, lambda: self.conn)

    def _open(self) -> psycopg.Connection:
        conn = open_connection(self._dsn)
        self._session.forget()
        return conn

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn.closed or self._conn.broken:
            log.warning("Postgres connection lost; reconnecting to %s", redact_dsn(self._dsn))
            self._conn = self._open()
        return self._conn

    # model contract --------------------------------------------------------------------------
    def stored_model(self) -> tuple[str, int] | None:
        if not self._exists(self.names.meta):
            return None
        row = self.conn.execute(
            sql.SQL("SELECT model_id, dim FROM {m}").format(m=self.names.meta)
        ).fetchone()
        return None if row is None else (row[0], int(row[1]))

    def _ready_model(self) -> tuple[str, int] | None:
        if self._ready is None and self._exists(self.names.ident()):
            self._check_layout()
            self._ready = self.stored_model()
        return self._ready

    def stored_layout(self) -> Layout | None:
        """Vector type and ANN quantization the table was built with (None: no table)."""
        name = self.names.ident().as_string(self.conn)
        return stored_layout(self.conn, name, self.names.hnsw.as_string(self.conn))

    def _check_layout(self) -> None:
        check_layout(self.stored_layout(), self.layout, self.names.table)

    def _exists(self, ident: sql.Identifier) -> bool:
        name = ident.as_string(self.conn)
        return self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]

    def _lock(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.names.lock_key])

    def _fix_model(self, model_id: str, dim: int) -> bool:
        """Inside a locked transaction: check or create the contract; True when this transaction
        created or altered the term cache's table (other connections cannot read it yet)."""
        stored = self.stored_model()
        common.check_model(stored, model_id, dim)
        if stored is not None:
            layout = self.stored_layout()
            check_layout(layout, self.layout, self.names.table)
            if layout is not None and layout.quantization == "unknown":
                log.warning("%s has no ANN index; building it", self.names.table)
                self._create_indexes(dim)
            if not terms_schema.exists(self.conn, self.names):
                log.info("adding the term cache to %s", self.names.table)
                self._create_term_cache(dim)
                return True
            if upgraded := terms_schema.upgrade(self.conn, self.names):
                log.info("term cache of %s: %s", self.names.table, ", ".join(upgraded))
                return True
            return False
        self.conn.execute(pg_ddl.create_meta(self.names))
        self.conn.execute(pg_ddl.create_table(self.names, dim, self.layout))
        self._create_indexes(dim)
        self.conn.execute(
            sql.SQL("INSERT INTO {m} (model_id, dim) VALUES (%s, %s)").format(m=self.names.meta),
            [model_id, int(dim)],
        )
        self._create_term_cache(dim)
        log.info("created %s for %s (%d-dim)", self.names.table, model_id, dim)
        return True

    def _create_term_cache(self, dim: int) -> None:
        for statement in terms_schema.create_statements(self.names, dim):
            self.conn.execute(statement)
        self.terms.forget_schema()  # check again at the next read

    def ensure_schema(self, model_id: str, dim: int) -> None:
        common.check_model(None, model_id, dim)
        with self.conn.transaction():
            self._lock()
            self._fix_model(model_id, int(dim))
            ensure_insertion_order(self.conn, self.names)

    def reset(self) -> None:
        """Drop the table and its model contract (the next write fixes a new model)."""
        with self.conn.transaction():
            self._lock()
            for statement in terms_schema.drop_statements(self.names):
                self.conn.execute(statement)
            for ident in (self.names.ident(), self.names.meta):
                self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {t}").format(t=ident))
        self._ready = None
        self.terms.forget_schema()

    # write side ------------------------------------------------------------------------------
    def _replace(
        self, rows: pa.Table, model_id: str, dim: int, progress: RowProgress | None
    ) -> None:
        import pyarrow.compute as pc

        if self.layout.vector_type == "halfvec":
            pg_copy.check_halfvec_range(common.embedding_matrix(rows))
        pmids = pc.unique(rows["pmid"]).to_pylist()
        with self._full_disk(), self.conn.transaction():
            self._lock()
            new_cache = self._fix_model(model_id, dim)
            ensure_insertion_order(self.conn, self.names)
            stale = terms_upkeep.begin(self.conn, self.names)
            if rows.num_rows >= self.bulk_rebuild_rows and self._is_empty():
                self._bulk_load(rows, dim, progress)
                report = terms_upkeep.clear_all(self.conn, self.names, "first build of the table")
            else:
                deleted = self._delete_returning(pmids)
                # an empty cache (cleared, new, or never warmed) has nothing to read ahead
                inline = (
                    bool(stale) or new_cache or not terms_schema.has_entries(self.conn, self.names)
                )
                cap = self.terms.params.depth
                ahead = terms_ahead.start(self._dsn, self.names, deleted, rows, cap, inline)
                pg_bulk.copy_rows(self.conn, self.names, rows, progress=progress)
                report = terms_upkeep.maintain(self.conn, self.names, deleted, rows, cap, ahead)
            report.cleared = report.cleared or stale
        self._upkept(report)
        pg_health.flush_gin_pending(self.conn, self.names.trgm.as_string(self.conn))
        pg_phrase.flush_pending(self.conn, self.names, self.substring_mode)

    def _bulk_load(self, rows: pa.Table, dim: int, progress: RowProgress | None) -> None:
        """First full build, in the caller's transaction: bare table, COPY, then every index."""
        self._build([rows], rows.num_rows, dim, progress)

    def _build(self, parts: Iterable[pa.Table], total: int, dim: int,
               progress: RowProgress | None) -> int:  # fmt: skip
        log.info("bulk load of %d rows into empty %s", total, self.names.table)
        pg_bulk.strip_table(self.conn, self.names)
        done = 0
        for part in parts:
            step = None if progress is None else (lambda n, base=done: progress(base + n))
            pg_bulk.copy_rows(self.conn, self.names, part, freeze=True, progress=step)
            done += part.num_rows
        pg_bulk.restore_primary_key(self.conn, self.names)
        memory = pg_bulk.build_memory_mb(done, dim, self.layout.indexed_type)
        pg_bulk.use_build_resources(self.conn, memory)
        self._create_indexes(dim)
        return done

    def load_empty(self, parts: Iterable[pa.Table], model: tuple[str, int], total: int,
                   progress: RowProgress | None = None) -> int | None:  # fmt: skip
        """Every part (validated store rows, each chunk once, in insertion order) into an empty
        table as one first build: one transaction, one build of every index, memory of one part.
        None, writing nothing, when the table holds rows (write them by replace_papers)."""
        model_id, dim = model
        with self._full_disk(), self.conn.transaction():
            self._lock()
            self._fix_model(model_id, dim)
            ensure_insertion_order(self.conn, self.names)
            stale = terms_upkeep.begin(self.conn, self.names)
            if not self._is_empty():
                return None
            checked = (_of_model(common.validate_rows(part), model) for part in parts
                       if part.num_rows)  # fmt: skip
            done = self._build(checked, total, dim, progress)
            report = terms_upkeep.clear_all(self.conn, self.names, "first build of the table")
            report.cleared = report.cleared or stale
        self._upkept(report)
        return done

    def clear_term_cache(self, reason: str) -> None:
        """Forget every kept answer and mark the cache current again (after a load that wrote
        the table without keeping it, or to measure cold requests)."""
        with self.conn.transaction():
            self._lock()
            if terms_schema.exists(self.conn, self.names):
                self._upkept(terms_upkeep.clear_all(self.conn, self.names, reason))

    def build_phrase_index(self) -> float | None:
        """Build the phrase index where missing or invalid, beside reads and writes; seconds, or
        None (already valid, off, no table)."""
        if not self.terms.params.phrase_index or self._ready_model() is None:
            return None
        return pg_phrase.build(self.conn, self.names, self.substring_mode)

    def _is_empty(self) -> bool:
        query = sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {t})").format(t=self.names.ident())
        return self.conn.execute(query).fetchone()[0]

    def _create_indexes(self, dim: int) -> None:
        for statement in self._index_statements(dim):
            self.conn.execute(statement)

    def _index_statements(self, dim: int) -> list[sql.Composed]:
        m, ef_construction = self.hnsw_m, self.hnsw_ef_construction
        return pg_ddl.create_indexes(self.names, m, ef_construction, self.layout, dim)

    def delete_papers(self, pmids: Sequence[str]) -> int:
        if not pmids or self._ready_model() is None:
            return 0
        with self._full_disk(), self.conn.transaction():
            self._lock()
            self._fix_model(*self._ready_model())
            stale = terms_upkeep.begin(self.conn, self.names)
            deleted = self._delete_returning(list(pmids))
            report = terms_upkeep.maintain(
                self.conn, self.names, deleted, None, self.terms.params.depth
            )
            report.cleared = report.cleared or stale
        self._upkept(report)
        return len(deleted)

    def _upkept(self, report: terms_upkeep.UpkeepReport) -> None:
        self.last_upkeep = report
        self.upkeep_total.add(report)
        self._rows.forget()

    def _delete_returning(self, pmids: list[str]) -> list[str]:
        """Delete every chunk of these papers; the deleted chunk ids (the cache's upkeep)."""
        query = sql.SQL("DELETE FROM {t} WHERE pmid = ANY(%s) RETURNING chunk_id")
        rows = self.conn.execute(query.format(t=self.names.ident()), [pmids]).fetchall()
        return [row[0] for row in rows]

    # inventory -------------------------------------------------------------------------------
    def _select(self, template: str, params: Sequence = ()) -> list[tuple]:
        if self._ready_model() is None:
            return []
        query = sql.SQL(template).format(t=self.names.ident())
        return self.conn.execute(query, params).fetchall()

    def count(self) -> int:
        rows = self._select("SELECT count(*) FROM {t}")
        return int(rows[0][0]) if rows else 0

    def paper_hashes(self, pmids: Sequence[str] | None = None) -> dict[str, str]:
        if pmids is None:
            return dict(self._select("SELECT DISTINCT ON (pmid) pmid, paper_hash FROM {t}"))
        return dict(
            self._select(
                "SELECT DISTINCT ON (pmid) pmid, paper_hash FROM {t} WHERE pmid = ANY(%s)",
                [list(pmids)],
            )
        )

    def chunk_hashes(self) -> dict[str, str]:
        return dict(self._select("SELECT chunk_id, content_hash FROM {t}"))

    def paper_chunks(self, pmids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        if pmids is None:
            return common.group_chunks(self._select("SELECT pmid, chunk_id, content_hash FROM {t}"))
        query = "SELECT pmid, chunk_id, content_hash FROM {t} WHERE pmid = ANY(%s)"
        return common.group_chunks(self._select(query, [list(pmids)]))

    def has_paper(self, pmid: str) -> bool:
        rows = self._select("SELECT EXISTS (SELECT 1 FROM {t} WHERE pmid = %s)", [pmid])
        return bool(rows and rows[0][0])

    def close(self) -> None:
        if not self._conn.closed:
            self.terms.flush()
        self._conn.close()


def _of_model(rows: pa.Table, model: tuple[str, int]) -> pa.Table:
    found = (common.rows_model(rows), common.rows_dim(rows))
    if found != (model[0], int(model[1])):
        raise ValueError(f"rows of {found[0]} ({found[1]}-dim) for a load of {model[0]} "
                         f"({model[1]}-dim)")  # fmt: skip
    return rows
