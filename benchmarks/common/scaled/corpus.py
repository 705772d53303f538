"""The retrieval workload at any size: realistic vectors (real SciFact title embeddings mixed
with noise) and real abstract text, streamed in slices so a million chunks never sit in memory
as text. What stays in memory is what the exact oracle needs: the vectors and the filter columns.

The corpus at 62,196 chunks is exactly the retrieval benchmark's latency workload (same stream,
seed and size), and every size shares its drug-like codes, so the same requests run at every size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from benchmarks.common.corpus import SyntheticStream, entity_pool
from benchmarks.common.data import embed_cached as cached
from benchmarks.common.data import scifact_queries, scifact_records
from benchmarks.common.requests import Request, make_requests
from candlefire_pipeline.corpus.schema import store_rows

log = logging.getLogger(__name__)

#: Rows per Arrow slice handed to a loader (~130 MB of rows at 384 dims).
SLICE_ROWS = 50_000
BATCH_KEY = "synthetic"

#: A loader takes one slice of store rows at a time.
Consumer = Callable[[pa.Table], None]


@dataclass
class ScaleCorpus:
    """The vectors and filter columns of a synthetic corpus; its rows come from `slices()`."""

    size: int
    model_id: str
    vectors: np.ndarray
    chunk_ids: np.ndarray
    pmids: np.ndarray
    years: np.ndarray  # float, NaN where unknown
    has_full_text: np.ndarray
    chunk_index: np.ndarray
    codes_in_abstracts: list[str]
    codes_in_bodies_only: list[str]
    absent_codes: list[str]
    _source: tuple[list[dict], np.ndarray]

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def slices(self, rows: int = SLICE_ROWS) -> Iterator[pa.Table]:
        """The store rows again, `rows` at a time (whole papers per slice), regenerated."""
        papers, base = self._source
        yield from _slices(SyntheticStream(papers, base, size=self.size), self.model_id, rows)

    def requests(self, n: int, seed: int = 11) -> list[Request]:
        """The retrieval request mix: the first n SciFact claims, 12 names, 3 codes each."""
        papers, _ = self._source
        pool = entity_pool([p["title"] for p in papers])
        return make_requests([q.text for q in scifact_queries()[:n]], pool, self, seed)


def _slices(stream: SyntheticStream, model_id: str, rows: int) -> Iterator[pa.Table]:
    chunks: list[dict] = []
    vectors: list[np.ndarray] = []
    for paper_chunks, paper_vectors in stream:
        chunks += paper_chunks
        vectors += paper_vectors
        if len(chunks) >= rows:
            yield store_rows(chunks, np.stack(vectors).astype(np.float32), BATCH_KEY, model_id)
            chunks, vectors = [], []
    if chunks:
        yield store_rows(chunks, np.stack(vectors).astype(np.float32), BATCH_KEY, model_id)


def stream_rows(embedder, size: int, rows: int) -> Iterator[pa.Table]:
    """The corpus of `size` chunks as store rows, `rows` at a time (whole papers per slice),
    nothing kept: the same rows, in the same order, as build_corpus makes."""
    papers = scifact_records()
    base = cached(embedder, [r["title"] for r in papers])
    yield from _slices(SyntheticStream(papers, base, size=size), embedder.model_id, rows)


def build_corpus(embedder, size: int, consume: Consumer | None = None) -> ScaleCorpus:
    """Generate the corpus once, keeping its vectors and filter columns; each slice of rows
    goes to `consume` (e.g. a COPY into a table) as it is made."""
    papers = scifact_records()
    # real embeddings of the SciFact titles (row i = papers[i]) seed the synthetic vectors
    base = cached(embedder, [r["title"] for r in papers])
    stream = SyntheticStream(papers, base, size=size)
    vectors = np.empty((size, base.shape[1]), dtype=np.float32)
    columns: dict[str, list] = {c: [] for c in ("chunk_id", "pmid", "year", "has_full_text",
                                                "chunk_index")}  # fmt: skip
    done = 0
    for part in _slices(stream, embedder.model_id, SLICE_ROWS):
        for name in columns:
            columns[name] += part[name].to_pylist()
        matrix = part["embedding"].combine_chunks().flatten().to_numpy()
        vectors[done : done + part.num_rows] = matrix.reshape(part.num_rows, -1)
        done += part.num_rows
        if consume is not None:
            consume(part)
        log.info("corpus of %d: %d chunks made", size, done)
    codes = stream.codes
    return ScaleCorpus(
        size=size,
        model_id=embedder.model_id,
        vectors=vectors,
        chunk_ids=np.asarray(columns["chunk_id"], dtype=object),
        pmids=np.asarray(columns["pmid"], dtype=object),
        years=np.asarray([np.nan if y is None else y for y in columns["year"]], dtype=float),
        has_full_text=np.asarray(columns["has_full_text"], dtype=bool),
        chunk_index=np.asarray(columns["chunk_index"], dtype=np.int32),
        codes_in_abstracts=codes.in_abstracts,
        codes_in_bodies_only=codes.bodies_only,
        absent_codes=codes.absent,
        _source=(papers, base),
    )
