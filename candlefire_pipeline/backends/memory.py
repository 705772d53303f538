"""An exact in-memory backend: numpy cosine over every chunk, the parity oracle."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import Filter, ResultRow, RowProgress
from candlefire_pipeline.backends.store import Store


@dataclass
class _View:
    """Read-side arrays over the stored table, rebuilt lazily after each write."""

    table: pa.Table

    @cached_property
    def unit(self) -> np.ndarray:
        return common.unit_rows(common.embedding_matrix(self.table))

    @cached_property
    def records(self) -> list[dict]:
        return self.table.drop_columns(["embedding"]).to_pylist()

    @cached_property
    def pmid(self) -> np.ndarray:
        return np.asarray(self.table["pmid"].to_pylist(), dtype=object)

    @cached_property
    def chunk_index(self) -> np.ndarray:
        return self.table["chunk_index"].to_numpy()

    @cached_property
    def year(self) -> np.ndarray:
        return self.table["year"].cast(pa.float64()).fill_null(np.nan).to_numpy()

    @cached_property
    def has_full_text(self) -> np.ndarray:
        return self.table["has_full_text"].to_numpy(zero_copy_only=False)

    def mask(self, where: Filter) -> np.ndarray:
        keep = np.ones(self.table.num_rows, dtype=bool)
        if where.pmids is not None:
            keep &= np.isin(self.pmid, np.asarray(list(where.pmids), dtype=object))
        if where.abstract_only:
            keep &= self.chunk_index == 0
        with np.errstate(invalid="ignore"):  # a null year (NaN) fails every year bound, like SQL
            if where.min_year is not None:
                keep &= self.year >= where.min_year
            if where.max_year is not None:
                keep &= self.year <= where.max_year
        if where.has_full_text is not None:
            keep &= self.has_full_text == where.has_full_text
        return keep

    def row(self, i: int, similarity: float | None) -> ResultRow:
        record = self.records[i]
        return common.result_row(record["chunk_id"], record["document"], record, similarity)

    def ranked(self, indices: np.ndarray, sims: np.ndarray, n: int) -> list[ResultRow]:
        """Top n of indices by sims (aligned arrays); rows tied with the n-th are all compared."""
        if len(indices) > n:
            nth_best = np.partition(sims, len(sims) - n)[len(sims) - n]
            chosen = sims >= nth_best
            indices, sims = indices[chosen], sims[chosen]
        rows = [self.row(int(i), float(s)) for i, s in zip(indices, sims, strict=True)]
        return common.sort_hits(rows)[:n]


class MemoryBackend(Store):
    """Exact cosine and substring search over an Arrow table; replace_papers is atomic."""

    name = "memory"

    def __init__(self, substring_mode: str = "like") -> None:
        self.substring_mode = common.check_substring_mode(substring_mode)
        self._lock = threading.Lock()
        self._model: tuple[str, int] | None = None
        self._table: pa.Table | None = None
        self._view: _View | None = None

    # write side ------------------------------------------------------------------------------
    def ensure_schema(self, model_id: str, dim: int) -> None:
        with self._lock:
            common.check_model(self._model, model_id, dim)
            self._model = (model_id, int(dim))

    def _replace(
        self, rows: pa.Table, model_id: str, dim: int, progress: RowProgress | None
    ) -> None:
        with self._lock:
            common.check_model(self._model, model_id, dim)
            self._model = (model_id, dim)
            kept = self._without(pc.unique(rows["pmid"]))
            self._set_table(pa.concat_tables([kept, rows]) if kept is not None else rows)
        if progress is not None:
            progress(rows.num_rows)

    def delete_papers(self, pmids: Sequence[str]) -> int:
        with self._lock:
            if self._table is None or not pmids:
                return 0
            before = self._table.num_rows
            self._set_table(self._without(pa.array(list(pmids), pa.string())))
            return before - self._table.num_rows

    def reset(self) -> None:
        """Forget every chunk and the model contract."""
        with self._lock:
            self._model, self._table, self._view = None, None, None

    def _without(self, pmids: pa.Array) -> pa.Table | None:
        if self._table is None:
            return None
        return self._table.filter(pc.invert(pc.is_in(self._table["pmid"], value_set=pmids)))

    def _set_table(self, table: pa.Table) -> None:
        self._table = table.combine_chunks()
        self._view = None

    def _current(self) -> _View | None:
        if self._table is None or self._table.num_rows == 0:
            return None
        if self._view is None:
            self._view = _View(self._table)
        return self._view

    # inventory -------------------------------------------------------------------------------
    def count(self) -> int:
        return 0 if self._table is None else self._table.num_rows

    def paper_hashes(self, pmids: Sequence[str] | None = None) -> dict[str, str]:
        hashes = self._column_map("pmid", "paper_hash")
        return hashes if pmids is None else {p: hashes[p] for p in pmids if p in hashes}

    def chunk_hashes(self) -> dict[str, str]:
        return self._column_map("chunk_id", "content_hash")

    def paper_chunks(self, pmids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        table = self._table
        if table is None:
            return {}
        if pmids is not None:
            table = table.filter(
                pc.is_in(table["pmid"], value_set=pa.array(list(pmids), pa.string()))
            )
        columns = (table[name].to_pylist() for name in ("pmid", "chunk_id", "content_hash"))
        return common.group_chunks(zip(*columns, strict=True))

    def _column_map(self, key: str, value: str) -> dict[str, str]:
        table = self._table
        if table is None:
            return {}
        return dict(zip(table[key].to_pylist(), table[value].to_pylist(), strict=True))

    def has_paper(self, pmid: str) -> bool:
        table = self._table
        return table is not None and pc.any(pc.equal(table["pmid"], pmid)).as_py() is True

    def stored_model(self) -> tuple[str, int] | None:
        return self._model

    # read side -------------------------------------------------------------------------------
    def _semantic(self, queries, n, where, stage, texts, model) -> list[list[ResultRow]]:
        # exact: one effort for every stage; the texts are not needed
        view = self._current()
        if view is None:
            return [[] for _ in range(len(queries))]
        keep = np.flatnonzero(view.mask(where))
        sims = view.unit[keep] @ common.unit_rows(queries).T
        return [view.ranked(keep, sims[:, q], n) for q in range(len(queries))]

    def _substring(self, variants, queries, n, where, model) -> list[list[ResultRow]]:
        view = self._current()
        out: list[list[ResultRow]] = []
        for variant, query in zip(variants, common.unit_rows(queries), strict=True):
            hits = self._substring_hits(view, [variant], where)
            out.append(view.ranked(hits, view.unit[hits] @ query, n) if hits.size else [])
        return out

    def _contains(self, variants: list[str], where: Filter) -> bool:
        return self._substring_hits(self._current(), variants, where).size > 0

    def _fetch(self, where: Filter) -> list[ResultRow]:
        view = self._current()
        if view is None:
            return []
        rows = [view.row(int(i), None) for i in np.flatnonzero(view.mask(where))]
        return common.sort_fetched(rows)

    def _substring_hits(self, view: _View | None, variants: list[str], where: Filter) -> np.ndarray:
        if view is None:
            return np.empty(0, dtype=np.int64)
        matches = common.substring_matcher(variants, self.substring_mode)
        keep = np.flatnonzero(view.mask(where))
        return np.asarray([i for i in keep if matches(view.records[i]["document"])], np.int64)

    def close(self) -> None:
        """Nothing to release; the data lives as long as the object."""
