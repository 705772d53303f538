"""The VectorBackend protocol's public methods, written once for every store.

Each method validates its arguments, answers the cases that need no store (no query, a filter
that selects nothing, a store without a model contract), then calls the store's own hook
(`_semantic`, `_substring`, `_contains`, `_fetch`, `_replace`). A store inherits Store, or
UpsertStore when it has no transactions (Chroma, Qdrant).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import Filter, Grounding, ResultRow, RowProgress

if TYPE_CHECKING:  # rows tables come with the writes: the app's read path never loads pyarrow
    import pyarrow as pa

Model = tuple[str, int]


class Store:
    """Validation and the empty answers of the protocol; a store supplies the hooks."""

    #: The model contract once known (a store sets it when it writes or resets).
    _model: Model | None = None

    def stored_model(self) -> Model | None:
        raise NotImplementedError

    def _read_model(self) -> Model | None:
        """The model reads check query vectors against, remembered once the store has one."""
        if self._model is None:
            self._model = self.stored_model()
        return self._model

    def _holds_nothing(self, model: Model | None) -> bool:
        """Whether a read may answer "nothing" without asking: no contract, no chunks."""
        return model is None

    # write side ------------------------------------------------------------------------------
    def replace_papers(self, rows: pa.Table, progress: RowProgress | None = None) -> int:
        rows = common.rows_to_write(rows, self.stored_model)
        if rows is None:
            return 0
        self._replace(rows, common.rows_model(rows), common.rows_dim(rows), progress)
        return rows.num_rows

    def _replace(
        self, rows: pa.Table, model_id: str, dim: int, progress: RowProgress | None
    ) -> None:
        """Write validated rows of one model, replacing every chunk of their papers."""
        raise NotImplementedError

    # read side -------------------------------------------------------------------------------
    def semantic_candidates(
        self,
        vectors: np.ndarray,
        n: int,
        where: Filter | None = None,
        stage: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> list[list[ResultRow]]:
        n, where = common.check_n(n), common.check_filter(where)
        stage = common.check_stage(stage)
        model = self._read_model()
        queries = common.query_matrix(vectors, model)
        texts = common.check_texts(texts, len(queries))
        if self._holds_nothing(model) or not len(queries) or common.matches_nothing(where):
            return [[] for _ in range(len(queries))]
        return self._semantic(queries, n, where, stage, texts, model)

    def _semantic(
        self,
        queries: np.ndarray,
        n: int,
        where: Filter,
        stage: str,
        texts: list[str] | None,
        model: Model | None,
    ) -> list[list[ResultRow]]:
        """Top n per query row (at least one; the filter may match), best first."""
        raise NotImplementedError

    def substring_candidates(
        self, variants: Sequence[str], vectors: np.ndarray, n: int, where: Filter | None = None
    ) -> list[list[ResultRow]]:
        n, where = common.check_n(n), common.check_filter(where)
        variants = common.check_variant_queries(variants, vectors)
        if not variants:
            return []
        model = self._read_model()
        queries = common.query_matrix(vectors, model)
        if self._holds_nothing(model) or common.matches_nothing(where):
            return [[] for _ in variants]
        return self._substring(variants, queries, n, where, model)

    def _substring(
        self,
        variants: list[str],
        queries: np.ndarray,
        n: int,
        where: Filter,
        model: Model | None,
    ) -> list[list[ResultRow]]:
        """Per variant, the top n chunks holding it by similarity to its query row."""
        raise NotImplementedError

    def ground_terms(self, terms: Sequence[Sequence[str]]) -> list[Grounding]:
        return common.ground_by_contains(self, terms)

    def contains(self, variants: Sequence[str], where: Filter | None = None) -> bool:
        where = common.check_filter(where)
        variants = common.clean_variants(variants)
        if not variants or common.matches_nothing(where):
            return False
        return not self._holds_nothing(self._read_model()) and self._contains(variants, where)

    def _contains(self, variants: list[str], where: Filter) -> bool:
        """Whether a chunk the filter selects holds one of these (clean) variants."""
        raise NotImplementedError

    def fetch(self, where: Filter) -> list[ResultRow]:
        where = common.check_filter(where)
        if common.matches_nothing(where) or self._holds_nothing(self._read_model()):
            return []
        return self._fetch(where)

    def _fetch(self, where: Filter) -> list[ResultRow]:
        """The chunks the filter selects, ordered by (pmid, chunk_index)."""
        raise NotImplementedError


class UpsertStore(Store):
    """A store without transactions: replace_papers upserts the new chunks, then deletes the
    papers' stale ones, so a failure midway leaves old and new side by side, never none."""

    def _replace(
        self, rows: pa.Table, model_id: str, dim: int, progress: RowProgress | None
    ) -> None:
        import pyarrow.compute as pc

        self.ensure_schema(model_id, dim)
        stored = set(self._chunk_ids_of(pc.unique(rows["pmid"]).to_pylist()))
        matrix = common.embedding_matrix(rows)
        size = self._upsert_batch()
        for start in range(0, rows.num_rows, size):
            part = rows.slice(start, size)
            self._upsert(part, matrix[start : start + size])
            if progress is not None:
                progress(start + part.num_rows)
        self._delete_chunks(sorted(stored - set(rows["chunk_id"].to_pylist())))

    def delete_papers(self, pmids: Sequence[str]) -> int:
        if not pmids:
            return 0
        chunk_ids = self._chunk_ids_of(list(pmids))
        self._delete_chunks(chunk_ids)
        return len(chunk_ids)

    def ensure_schema(self, model_id: str, dim: int) -> None:
        raise NotImplementedError

    def _upsert_batch(self) -> int:
        """Rows per upsert call."""
        raise NotImplementedError

    def _upsert(self, part: pa.Table, vectors: np.ndarray) -> None:
        """Write these validated rows (and their vectors) over any chunk of the same id."""
        raise NotImplementedError

    def _chunk_ids_of(self, pmids: list[str]) -> list[str]:
        """The stored chunk ids of these papers."""
        raise NotImplementedError

    def _delete_chunks(self, chunk_ids: list[str]) -> None:
        raise NotImplementedError
