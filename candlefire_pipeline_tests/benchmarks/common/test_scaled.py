"""The scale benchmarks' corpus stream and exact matrix oracle: the stream regenerates exactly the
rows whose vectors the oracle holds, and the oracle answers as the memory backend (the exact
oracle of the parity report) does, with every Filter."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.common.corpus import synthetic_corpus
from benchmarks.common.matrix_oracle import MatrixOracle
from benchmarks.common.scaled.corpus import stream_rows
from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline_tests.benchmarks.conftest import SIZE


def test_slices_regenerate_the_rows_the_corpus_holds(scaled_corpus):
    scale, rows = scaled_corpus
    again = pa.concat_tables(list(scale.slices(rows=700)))
    assert again.num_rows == rows.num_rows == SIZE
    assert again["chunk_id"].to_pylist() == list(scale.chunk_ids)
    assert again["document"].equals(rows["document"])
    matrix = again["embedding"].combine_chunks().flatten().to_numpy().reshape(SIZE, -1)
    assert np.array_equal(matrix, scale.vectors)
    years = [np.nan if y is None else y for y in again["year"].to_pylist()]
    assert np.array_equal(np.asarray(years, dtype=float), scale.years, equal_nan=True)


def test_the_stream_is_the_latency_workloads_corpus(scaled_corpus):
    scale, rows = scaled_corpus
    papers, base = scale._source
    whole = synthetic_corpus(papers, base, size=SIZE)
    assert [c["chunk_id"] for c in whole.chunks] == list(scale.chunk_ids)
    assert [c["document"] for c in whole.chunks] == rows["document"].to_pylist()
    assert whole.codes_in_abstracts == scale.codes_in_abstracts


@pytest.mark.parametrize(
    "where",
    [
        None,
        Filter(min_year=2000, max_year=2010),
        Filter(has_full_text=False),
        Filter(abstract_only=True, min_year=2020),
        Filter(pmids=("50000003", "50000010", "50000500", "no-such-pmid")),
        Filter(min_year=2030),  # nothing matches
    ],
    ids=["all", "years", "full-text", "abstract+year", "pmids", "none-match"],
)
def test_oracle_answers_as_the_memory_backend(scaled_corpus, scaled_memory, where):
    scale, _ = scaled_corpus
    oracle = MatrixOracle(scale, scaled_memory)
    queries = scale.vectors[[5, 700, 1900]] + 0.05
    ours = oracle.semantic_candidates(queries, 25, where)
    theirs = scaled_memory.semantic_candidates(queries, 25, where)
    for got, ref in zip(ours, theirs, strict=True):
        assert [r["chunk_id"] for r in got] == [r["chunk_id"] for r in ref]
        assert [r["document"] for r in got] == [r["document"] for r in ref]
        assert np.allclose([r["similarity"] for r in got], [r["similarity"] for r in ref],
                           atol=1e-6)  # fmt: skip
    if where == Filter(min_year=2030):
        assert ours == [[], [], []]


def test_oracle_delegates_every_other_call_to_the_store(scaled_corpus, scaled_memory):
    scale, _ = scaled_corpus
    oracle = MatrixOracle(scale, scaled_memory)
    term = scale.codes_in_abstracts[0]
    assert oracle.contains([term]) == scaled_memory.contains([term])
    assert oracle.count() == SIZE


def test_stream_rows_are_the_corpus_rows_without_keeping_them(scaled_corpus, monkeypatch, tmp_path):
    _, rows = scaled_corpus
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path))
    slices = list(stream_rows(HashingEmbedder(dim=32), SIZE, 700))
    assert all(s.num_rows >= 700 for s in slices[:-1])  # whole papers: a slice may run over
    assert pa.concat_tables(slices).equals(rows)
