"""Every backend returns the same rows for the same data (exact search on small data)."""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.backends.base import RESULT_FIELDS, Filter
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests.fixtures_backends import (
    BACKEND_NAMES,
    chunk,
    make_rows,
    unit_vectors,
)

DIM = 16
WORDS = ["SPG302", "tau", "IL-6", "amyloid", "kinase", "50%", "x_y"]


def corpus() -> tuple[list[dict], np.ndarray]:
    """40 papers, some with full text, seeded words and years (a few unknown)."""
    rng = np.random.default_rng(11)
    chunks = []
    for p in range(40):
        pmid = str(1000 + p)
        sections = int(rng.integers(1, 4))
        year = None if p % 9 == 0 else int(rng.integers(1985, 2025))
        for i in range(sections):
            words = " ".join(rng.choice(WORDS, 3))
            chunks.append(
                chunk(pmid, i, has_full_text=sections > 1, year=year, document=f"{pmid} {words}",
                      citation_count=int(rng.integers(0, 50)), entity_names="a,b")
            )  # fmt: skip
    return chunks, unit_vectors(len(chunks), DIM, seed=12)


@pytest.fixture
def stores(make_backend):
    chunks, vectors = corpus()
    rows = make_rows(chunks, vectors)
    out = {}
    for name in BACKEND_NAMES:
        out[name] = make_backend(name)
        out[name].ensure_schema("test", DIM)
        out[name].replace_papers(rows)
    return out


def assert_same(results: dict[str, list[dict]]) -> None:
    reference = results["memory"]
    for name, rows in results.items():
        assert [r["chunk_id"] for r in rows] == [r["chunk_id"] for r in reference], name
        for row, ref in zip(rows, reference, strict=True):
            for field in RESULT_FIELDS:
                if field == "similarity" and ref[field] is not None:
                    assert row[field] == pytest.approx(ref[field], abs=1e-5), name
                else:
                    assert row[field] == ref[field], (name, field)


FILTERS = [
    Filter(),
    Filter(abstract_only=True),
    Filter(min_year=2000, max_year=2015),
    Filter(has_full_text=True),
    Filter(pmids=("1003", "1010", "1021")),
]


@pytest.mark.parametrize("where", FILTERS, ids=range(len(FILTERS)))
def test_semantic_candidates_agree(stores, where):
    queries = unit_vectors(4, DIM, seed=13)
    per_backend = {name: s.semantic_candidates(queries, 10, where) for name, s in stores.items()}
    for q in range(len(queries)):
        assert_same({name: lists[q] for name, lists in per_backend.items()})
    available = len(stores["memory"].fetch(where))
    assert all(len(lists[0]) == min(10, available) for lists in per_backend.values())


@pytest.mark.parametrize("variants", [["SPG302"], ["tau", "x_y"], ["50%"], ["IL-6", "IL 6"]])
@pytest.mark.parametrize("where", [Filter(), Filter(abstract_only=True)], ids=["all", "abstract"])
def test_substring_candidates_and_contains_agree(stores, variants, where):
    queries = unit_vectors(len(variants), DIM, seed=14)
    per_store = {n: s.substring_candidates(variants, queries, 15, where) for n, s in stores.items()}
    for i in range(len(variants)):
        assert_same({name: lists[i] for name, lists in per_store.items()})
    assert len({s.contains(variants, where) for s in stores.values()}) == 1


@pytest.mark.parametrize("where", FILTERS, ids=range(len(FILTERS)))
def test_fetch_agrees(stores, where):
    assert_same({name: s.fetch(where) for name, s in stores.items()})


def test_inventory_agrees(stores):
    for name in STORE_NAMES:
        assert stores[name].count() == stores["memory"].count()
        assert stores[name].paper_hashes() == stores["memory"].paper_hashes()
        assert stores[name].chunk_hashes() == stores["memory"].chunk_hashes()
