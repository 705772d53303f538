"""Shared by the benchmark helpers' tests: the workload at a small size, streamed, and the exact
memory backend over the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from benchmarks.common.scaled.corpus import build_corpus
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import HashingEmbedder

SIZE = 2_500


@pytest.fixture(scope="session")
def scaled_corpus(tmp_path_factory):
    """(ScaleCorpus, every row it streamed) of SIZE chunks, hashing-v1 32-dim vectors."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path_factory.mktemp("bench")))
    made: list[pa.Table] = []
    corpus = build_corpus(HashingEmbedder(dim=32), SIZE, consume=made.append)
    monkeypatch.undo()
    return corpus, pa.concat_tables(made)


@pytest.fixture(scope="session")
def scaled_memory(scaled_corpus):
    """The exact memory backend holding the same rows."""
    _, rows = scaled_corpus
    store = build_backend("memory")
    store.ensure_schema("hashing-v1", 32)
    store.replace_papers(rows)
    return store
