"""candle-fire's chunk records mapped to the project's rows: every bad page or value named by its
chunk id and key, never a row silently dropped; papers reconstructed from their chunks."""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.operations.adoption.mapping import (
    chunk_row,
    page_rows,
    reconstruct_paper,
)
from candlefire_pipeline.operations.adoption.source import AdoptionError, AppPage

META = {"pmid": "7", "title": "T", "year": 2021, "doi": "", "citation_count": 4,
        "entity_names": "SOD1,TDP-43", "mesh_terms": "ALS", "has_full_text": 0,
        "section": "abstract", "chunk_index": 0}  # fmt: skip


def page(embeddings, ids=("7",), metadatas=None, documents=None) -> AppPage:
    return AppPage(0, list(ids), documents or ["T\nALS\nabstract"] * len(ids),
                   metadatas or [META] * len(ids), embeddings)  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (page(None), "read without documents, metadatas or embeddings"),
        (page(np.ones((1, 4), np.float32), ids=("7", "8")), "no stored embedding for some rows"),
        (page(np.zeros((1, 4), np.float32)), "'7': its vector is zero or not finite"),
        (page(np.array([[1.0, np.nan, 0, 0]], np.float32)), "zero or not finite"),
        (page(np.ones((1, 3), np.float32)), "'7': its vector has 3 dimensions, the rows before"),
    ],
)
def test_a_bad_page_is_refused_by_chunk_id(bad, message):
    with pytest.raises(AdoptionError, match=message):
        page_rows(bad, dim=4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"year": "twenty"}, "'year' = 'twenty' is not a year"),
        ({"citation_count": True}, "'citation_count' is a bool"),
        ({"citation_count": 2.5}, "'citation_count' = 2.5 is not a whole number"),
        ({"chunk_index": -1}, "'chunk_index' = -1 is not a whole number >= 0"),
        ({"pmid": "7 8"}, "pmid '7 8' is not 1-32 letters/digits"),
        ({"entity_names": None}, "'entity_names' is not a scalar"),
    ],
)
def test_a_bad_value_is_refused_by_chunk_id_and_key(change, message):
    with pytest.raises(AdoptionError, match=message):
        chunk_row("7", "doc", {**META, **change})


@pytest.mark.parametrize(
    ("given", "held"),
    [({"year": 0}, None), ({"year": "2019"}, 2019), ({}, None), ({"year": 2021.0}, 2021)],
)
def test_candlefire_years_map_to_the_projects(given, held):
    meta = {k: v for k, v in META.items() if k != "year"} | given
    row = chunk_row("7", "doc", meta)
    assert row["year"] == held and row["has_full_text"] is False and row["content_hash"]


def test_a_paper_is_rebuilt_from_its_bare_and_section_chunks():
    meta = {**META, "has_full_text": 1}
    bare = chunk_row("7", "T\nALS\nold abstract", META)
    s0 = chunk_row("7_s0", "T\n[Abstract]\nnew abstract", {**meta, "section": "Abstract"})
    s1 = chunk_row("7_s1", "T\n[Results]\nline one\nline two",
                   {**meta, "section": "Results", "chunk_index": 1})  # fmt: skip
    paper = reconstruct_paper([bare, s0, s1], record_no=3)
    assert paper["abstract"] == "new abstract"  # the section chunk's, not the stale bare one
    assert paper["full_text"] == "[Results]\nline one\nline two"
    assert paper["entity_names"] == ["SOD1", "TDP-43"] and paper["record_no"] == 3
    alone = reconstruct_paper([bare], record_no=1)
    assert alone["abstract"] == "old abstract" and alone["full_text"] is None
