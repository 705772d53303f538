"""An exact oracle for corpora too big for the memory backend: exact cosine top-n over the
corpus' vectors (numpy), rows read from a store; every other call goes to that store.

Only the ANN stages need an oracle: pgvector's keyword fetch (trigram filter, then an exact sort)
and its grounding are exact already. The memory backend keeps every row as a Python dict (GBs at
a million chunks); this keeps the float32 vectors and the filter columns only. Candidates are
picked in float32 blocks, then the best n + REFINE re-scored in float64, so the cut is exact to
well inside the retriever's 3e-6 tie margin.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from candlefire_pipeline.backends.base import Filter, ResultRow

#: Candidates beyond n re-scored in float64 before the cut.
REFINE = 32
#: Corpus rows per float32 block (bounds the scratch memory of one sub-query batch).
BLOCK = 262_144


class MatrixOracle:
    """semantic_candidates exact over `corpus` (vectors, chunk_ids, pmids, years,
    has_full_text, chunk_index); the rest of the backend protocol is `store`'s."""

    name = "exact oracle"

    def __init__(self, corpus, store) -> None:
        self.corpus, self._store = corpus, store
        self._norms = np.linalg.norm(corpus.vectors, axis=1).astype(np.float64)
        self._masks: dict[Filter, np.ndarray] = {}

    def mask(self, where: Filter | None) -> np.ndarray | None:
        """Rows a filter keeps (None: all); a missing year fails every year bound, as in SQL."""
        if where is None or where == Filter():
            return None
        if where not in self._masks:
            c = self.corpus
            keep = np.ones(len(c.chunk_ids), dtype=bool)
            if where.pmids is not None:
                keep &= np.isin(c.pmids, np.asarray(list(where.pmids), dtype=object))
            if where.abstract_only:
                keep &= c.chunk_index == 0
            with np.errstate(invalid="ignore"):
                if where.min_year is not None:
                    keep &= c.years >= where.min_year
                if where.max_year is not None:
                    keep &= c.years <= where.max_year
            if where.has_full_text is not None:
                keep &= c.has_full_text == where.has_full_text
            self._masks[where] = keep
        return self._masks[where]

    def top(self, vectors: np.ndarray, n: int, where: Filter | None = None) -> list[list]:
        """Per query vector: (row index, cosine) of its n most similar rows, most similar first."""
        queries = np.asarray(vectors, dtype=np.float32).reshape(-1, self.corpus.dim)
        keep = self.mask(where)
        picked: list[list[tuple[float, int]]] = [[] for _ in range(len(queries))]
        wanted = n + REFINE
        for start in range(0, len(self._norms), BLOCK):
            block = self.corpus.vectors[start : start + BLOCK] @ queries.T
            if keep is not None:
                block[~keep[start : start + BLOCK]] = -np.inf
            for q in range(len(queries)):
                column = block[:, q]
                take = min(wanted, len(column))
                best = np.argpartition(-column, take - 1)[:take]
                picked[q] += [(float(column[i]), start + int(i)) for i in best if column[i] > -2]
        return [self._exact(queries[q], rows, n) for q, rows in enumerate(picked)]

    def _exact(self, query: np.ndarray, rows: list[tuple[float, int]], n: int) -> list:
        rows = sorted(rows, reverse=True)[: n + REFINE]
        index = np.asarray([i for _, i in rows], dtype=np.int64)
        if not len(index):
            return []
        q = query.astype(np.float64)
        exact = (self.corpus.vectors[index].astype(np.float64) @ q) / (
            self._norms[index] * np.linalg.norm(q)
        )
        ids = self.corpus.chunk_ids
        order = sorted(range(len(index)), key=lambda k: (-exact[k], ids[index[k]]))
        return [(int(index[k]), float(exact[k])) for k in order[:n]]

    def semantic_candidates(
        self,
        vectors: np.ndarray,
        n: int,
        where: Filter | None = None,
        stage: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> list[list[ResultRow]]:
        tops = self.top(vectors, n, where)
        wanted = {self.corpus.pmids[i] for rows in tops for i, _ in rows}
        by_id = self._rows(sorted(wanted))
        return [
            [{**by_id[self.corpus.chunk_ids[i]], "similarity": sim} for i, sim in rows]
            for rows in tops
        ]

    def _rows(self, pmids: Sequence[str]) -> dict[str, ResultRow]:
        if not pmids:
            return {}
        return {row["chunk_id"]: row for row in self._store.fetch(Filter(pmids=tuple(pmids)))}

    def __getattr__(self, attribute: str):
        return getattr(self._store, attribute)
