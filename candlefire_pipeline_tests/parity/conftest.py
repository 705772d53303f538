"""Module-scoped demo rows for the parity harness tests."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus import demo
from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline_tests.fixtures_backends import make_rows
from candlefire_pipeline_tests.parity.demo_stores import EMBEDDER, PAPERS


@pytest.fixture(scope="module")
def demo_chunks(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("parity_demo")
    first_drop = demo.write_demo_drops(root / "drops")[0]
    write_papers(first_drop, root / "b1")
    write_chunks(root / "b1")
    wanted = {demo.demo_pmid(n) for n in range(1, PAPERS + 1)}
    chunks = pq.read_table(root / "b1/chunks.parquet").to_pylist()
    return [c for c in chunks if c["pmid"] in wanted]


@pytest.fixture(scope="module")
def demo_rows(demo_chunks):
    vectors = EMBEDDER.embed([c["document"] for c in demo_chunks])
    return make_rows(demo_chunks, vectors, model_id=EMBEDDER.model_id)
