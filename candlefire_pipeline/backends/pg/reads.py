"""The pgvector store's read side: ANN and substring candidates, grounding, fetch, and what the
term cache reads through (a mixin of PgVectorBackend, which owns the connection and settings)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import RESULT_FIELDS, Filter, Grounding, ResultRow
from candlefire_pipeline.backends.pg import phrase as pg_phrase
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.layout import StageEffort, stage_effort
from candlefire_pipeline.backends.pg.terms import cold as terms_cold
from candlefire_pipeline.backends.store import Store


class PgReads(Store):
    """Reads of PgVectorBackend; expects conn, names, layout, ann, substring_mode, terms,
    _session, _rows, _searching and _ready_model() from it."""

    def _read_model(self) -> tuple[str, int] | None:
        return self._ready_model()

    # read side (Store validates and answers the empty cases) ---------------------------------
    def _semantic(self, queries, n, where, stage, texts, model) -> list[list[ResultRow]]:
        if texts is not None and stage == "entities" and where == Filter():
            with self._searching:
                return self.terms.entity_candidates(texts, queries, n)
        candidates = self.layout.candidates(n, self.ann.rerank_factor)
        with self._searching:
            exact = self._rows.estimate(self.conn, self.names) <= self.ann.full_scan_rows
            if not exact:
                self._session.apply(self.conn, stage_effort(self.ann, stage, candidates).gucs())
            out = self._nearest(queries, n, where, model[1], candidates, exact)
            # A graph walk ends after hnsw.max_scan_tuples: under a selective filter it can stop
            # with fewer than n matches while more exist (30 of 60 at 0.15% of 250k chunks, the
            # filters benchmark). Those queries are asked exactly, so a list is short only when
            # fewer rows match.
            short = [] if exact else [i for i, hits in enumerate(out) if len(hits) < n]
            if short:
                again = self._nearest(queries[short], n, where, model[1], candidates, True)
                for i, hits in zip(short, again, strict=True):
                    out[i] = hits
        return out

    def _nearest(
        self, queries: np.ndarray, n: int, where: Filter, dim: int, candidates: int, exact: bool
    ) -> list[list[ResultRow]]:
        query, params = pg_sql.semantic_query(
            self.names, where, list(queries), n, self.layout, dim, candidates, exact
        )
        out: list[list[ResultRow]] = [[] for _ in range(len(queries))]
        for row in self.conn.execute(query, params).fetchall():
            out[row[0] - 1].append(_result(row[1:-1]))
        return out

    def _substring(self, variants, queries, n, where, model) -> list[list[ResultRow]]:
        if where == Filter():
            with self._searching:
                return self.terms.keyword_candidates(variants, queries, n)
        query, params = pg_sql.substring_query(
            self.names, variants, self.substring_mode, where, list(queries), n, self.layout
        )
        out: list[list[ResultRow]] = [[] for _ in variants]
        for row in self.conn.execute(query, params).fetchall():
            out[row[0]].append(_result(row[1:-1]))
        return out

    def ground_terms(self, terms: Sequence[Sequence[str]]) -> list[Grounding]:
        groups = [common.clean_variants(variants) for variants in terms]
        flat = list(dict.fromkeys(v for group in groups for v in group))
        if not flat or self._ready_model() is None:
            return [Grounding(False, False) for _ in groups]
        with self._searching:
            facts = self.terms.grounding(flat)
        return [common.grounding_of(group, facts) for group in groups]

    def _contains(self, variants: list[str], where: Filter) -> bool:
        query, params = pg_sql.contains_query(self.names, variants, self.substring_mode, where)
        return bool(self.conn.execute(query, params).fetchone()[0])

    def _fetch(self, where: Filter) -> list[ResultRow]:
        query, params = pg_sql.fetch_query(self.names, where)
        return [_result(row) for row in self.conn.execute(query, params).fetchall()]

    # what the term cache reads through -------------------------------------------------------
    def model(self) -> tuple[str, int]:
        stored = self._ready_model()
        if stored is None:
            raise RuntimeError(f"{self.names.table} holds no model yet")
        return stored

    def exact_scan(self) -> bool:
        """Whether the table is small enough to be searched without a graph walk."""
        return self._rows.estimate(self.conn, self.names) <= self.ann.full_scan_rows

    def phrase_state(self) -> str:
        """The phrase index: "valid", "invalid", "absent", or "off" (CANDLEFIRE_PHRASE_INDEX)."""
        if not self.terms.params.phrase_index:
            return "off"
        return pg_phrase.state(self.conn, self.names, self.substring_mode)

    def phrase_ready(self) -> bool:
        """Whether the phrase index may serve this table's probes (read each time: a first
        build drops it, and a probe through a missing index would compute every row's keys)."""
        return self.phrase_state() == "valid"

    def row_estimate(self) -> int:
        return self._rows.estimate(self.conn, self.names)

    def apply_effort(self, effort: StageEffort) -> None:
        self._session.apply(self.conn, effort.gucs())

    @contextmanager
    def plan(self, settings: dict[str, str]) -> Iterator[None]:
        """Planner settings for the statements of the block (one transaction), or none."""
        if not settings:
            yield
            return
        with self.conn.transaction():
            self.conn.execute(terms_cold.plan_settings(settings))
            yield

    def result(self, row: Sequence) -> ResultRow:
        return _result(row)

    def rows_by_id(self, chunk_ids: list[str]) -> dict[str, ResultRow]:
        if not chunk_ids:
            return {}
        query, params = terms_cold.rows_query(self.names, chunk_ids)
        rows = (_result(row) for row in self.conn.execute(query, params).fetchall())
        return {row["chunk_id"]: row for row in rows}


def _result(row: Sequence) -> ResultRow:
    record = dict(zip(RESULT_FIELDS, row, strict=True))
    return common.result_row(record["chunk_id"], record["document"], record, record["similarity"])
