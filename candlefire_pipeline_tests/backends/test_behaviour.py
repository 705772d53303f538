"""One behaviour suite, run against real Postgres+pgvector, real Chroma and the memory oracle."""

from __future__ import annotations

import numpy as np
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError, Filter, VectorBackend
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8


def rows_for(chunks: list[dict], seed: int = 0, **kwargs):
    return make_rows(chunks, unit_vectors(len(chunks), kwargs.pop("dim", DIM), seed), **kwargs)


def ids(rows) -> list[str]:
    return [row["chunk_id"] for row in rows]


def similarity_tolerance(store) -> float:
    """Every store and layout returns the float32 cosine: similarities agree to float noise."""
    return 1e-5


def test_is_a_vector_backend(backend):
    assert isinstance(backend, VectorBackend)


def test_empty_store_answers_empty(backend):
    assert backend.stored_model() is None
    assert backend.count() == 0
    assert backend.paper_hashes() == {} and backend.chunk_hashes() == {}
    assert backend.paper_chunks() == {} and backend.paper_chunks(["1"]) == {}
    assert not backend.has_paper("1")
    assert backend.semantic_candidates(unit_vectors(2, DIM), 5) == [[], []]
    assert backend.substring_candidates(["x", "y"], unit_vectors(2, DIM), 5) == [[], []]
    assert backend.substring_candidates([], unit_vectors(0, DIM), 5) == []
    assert not backend.contains(["x"])
    assert backend.fetch(Filter()) == []


def test_replace_delete_count_and_inventory(backend):
    papers = [chunk("1"), chunk("2", 0, has_full_text=True), chunk("2", 1), chunk("3")]
    assert backend.replace_papers(rows_for(papers)) == 4
    assert backend.stored_model() == ("test", DIM)
    assert backend.count() == 4
    assert backend.paper_hashes() == {"1": "p-1", "2": "p-2", "3": "p-3"}
    assert backend.paper_hashes(["3", "2", "9"]) == {"2": "p-2", "3": "p-3"}
    assert backend.paper_hashes([]) == {}
    assert backend.chunk_hashes() == {"1": "c-1-0", "2_s0": "c-2-0", "2_s1": "c-2-1", "3": "c-3-0"}
    assert backend.paper_chunks(["2", "9"]) == {"2": {"2_s0": "c-2-0", "2_s1": "c-2-1"}}
    assert backend.paper_chunks([]) == {}
    assert backend.paper_chunks() == {
        "1": {"1": "c-1-0"}, "2": {"2_s0": "c-2-0", "2_s1": "c-2-1"}, "3": {"3": "c-3-0"},
    }  # fmt: skip
    assert backend.has_paper("2") and not backend.has_paper("4")

    # replacing paper 2 with one chunk drops its other chunk and leaves papers 1 and 3 alone
    new_two = chunk("2", 0, has_full_text=True, paper_hash="p-2b", content_hash="c-2-new")
    assert backend.replace_papers(rows_for([new_two], seed=1)) == 1
    assert backend.count() == 3
    assert backend.paper_hashes()["2"] == "p-2b"
    assert backend.chunk_hashes() == {"1": "c-1-0", "2_s0": "c-2-new", "3": "c-3-0"}

    assert backend.delete_papers(["1", "404"]) == 1
    assert backend.delete_papers([]) == 0
    assert backend.count() == 2 and not backend.has_paper("1")


def test_paper_gaining_full_text_loses_bare_pmid_chunk(backend):
    backend.replace_papers(rows_for([chunk("7", document="abstract only")]))
    assert ids(backend.fetch(Filter(pmids=("7",)))) == ["7"]
    full = [chunk("7", i, has_full_text=True, paper_hash="p-7b") for i in range(3)]
    backend.replace_papers(rows_for(full, seed=2))
    fetched = backend.fetch(Filter(pmids=("7",)))
    assert ids(fetched) == ["7_s0", "7_s1", "7_s2"]
    assert all(row["has_full_text"] for row in fetched)


def test_dimension_contract_raises_before_writing(backend):
    backend.ensure_schema("test", DIM)
    backend.ensure_schema("test", DIM)  # same model again is fine
    backend.replace_papers(rows_for([chunk("1")]))
    with pytest.raises(DimensionMismatchError, match=r"'test'.*'other'"):
        backend.ensure_schema("other", DIM)
    with pytest.raises(DimensionMismatchError, match=rf"{DIM}-dim.*{DIM * 2}-dim"):
        backend.ensure_schema("test", DIM * 2)
    with pytest.raises(DimensionMismatchError):
        backend.replace_papers(rows_for([chunk("2")], dim=DIM * 2))
    with pytest.raises(DimensionMismatchError, match="'other'"):
        backend.replace_papers(rows_for([chunk("1", paper_hash="x"), chunk("3")], model_id="other"))
    with pytest.raises(DimensionMismatchError):
        backend.semantic_candidates(unit_vectors(1, DIM * 2), 3)
    assert backend.stored_model() == ("test", DIM)
    assert backend.count() == 1
    assert backend.paper_hashes() == {"1": "p-1"}


def test_rows_are_validated(backend):
    with pytest.raises(ValueError, match="pmid"):
        backend.replace_papers(rows_for([chunk("")]))
    with pytest.raises(ValueError, match="duplicates"):
        backend.replace_papers(rows_for([chunk("1"), chunk("1")]))
    assert backend.count() == 0


LITERALS = [
    ("50%", "growth of 50% in year one", "growth of 502 in year one"),
    ("x_y", "the x_y axis", "the xzy axis"),
    ("O'Brien", "O'Brien et al. reported", "OBrien et al. reported"),
    ("a\\b", "escaped a\\b here", "escaped ab here"),
    ("a;b", "list a;b c", "list a b c"),
    ("'; DROP TABLE chunks; --", "odd '; DROP TABLE chunks; -- text", "odd DROP TABLE chunks text"),
]


@pytest.mark.parametrize(("term", "hit", "miss"), LITERALS, ids=[t for t, _, _ in LITERALS])
def test_substring_metacharacters_match_literally(backend, term, hit, miss):
    backend.replace_papers(rows_for([chunk("1", document=hit), chunk("2", document=miss)]))
    assert backend.contains([term])
    (found,) = backend.substring_candidates([term], unit_vectors(1, DIM, 9), 10)
    assert ids(found) == ["1"]
    assert backend.count() == 2  # the injection attempt changed nothing


def test_short_terms_match_on_every_backend(backend):
    """Measured: chromadb 1.5.9 matches 1-2 character terms too (see chroma.SHORT_TERMS_MATCH)."""
    backend.replace_papers(
        rows_for([chunk("1", document="IL-6 and TNF"), chunk("2", document="z")])
    )
    assert backend.contains(["IL"])
    assert backend.contains(["z"])
    assert not backend.contains(["q"])
    six, zed = backend.substring_candidates(["6", "z"], unit_vectors(2, DIM), 5)
    assert ids(six) == ["1"] and ids(zed) == ["2"]


def test_empty_variant_is_an_error(backend):
    backend.replace_papers(rows_for([chunk("1")]))
    with pytest.raises(ValueError, match="non-empty"):
        backend.contains([""])
    with pytest.raises(ValueError, match="non-empty"):
        backend.substring_candidates([""], unit_vectors(1, DIM), 3)


def test_one_query_vector_per_variant_is_required(backend):
    backend.replace_papers(rows_for([chunk("1")]))
    with pytest.raises(ValueError, match="one query vector per variant"):
        backend.substring_candidates(["a", "b"], unit_vectors(1, DIM), 3)
    with pytest.raises(TypeError, match="not one string"):
        backend.substring_candidates("ab", unit_vectors(1, DIM), 3)


def test_like_mode_is_case_sensitive(backend):
    backend.replace_papers(rows_for([chunk("1", document="dose of SPG302 daily")]))
    assert backend.contains(["SPG302"])
    assert not backend.contains(["spg302"])


@pytest.mark.parametrize("name", ["pgvector", "memory"])
def test_ilike_mode_ignores_case(make_backend, name):
    store = make_backend(name, substring_mode="ilike")
    store.replace_papers(rows_for([chunk("1", document="dose of SPG302 and ΩMEGA daily")]))
    assert store.contains(["spg302"]) and store.contains(["ωmega"])
    assert ids(store.substring_candidates(["Spg302"], unit_vectors(1, DIM), 3)[0]) == ["1"]
    assert not store.contains(["spg303"])


def test_chroma_refuses_ilike(make_backend):
    with pytest.raises(ValueError, match="case-sensitive"):
        make_backend("chroma", substring_mode="ilike")


def test_abstract_only_restricts_to_chunk_zero(backend):
    papers = [
        chunk("1", 0, has_full_text=True, document="abstract text"),
        chunk("1", 1, document="results mention SPG302"),
    ]
    backend.replace_papers(rows_for(papers))
    assert backend.contains(["SPG302"])
    assert not backend.contains(["SPG302"], Filter(abstract_only=True))
    assert backend.contains(["abstract"], Filter(abstract_only=True))
    assert ids(backend.fetch(Filter(pmids=("1",), abstract_only=True))) == ["1_s0"]


def test_metadata_filters(backend):
    papers = [
        chunk("1", year=1995),
        chunk("2", year=2010),
        chunk("3", year=None),
        chunk("4", 0, has_full_text=True, year=2020),
        chunk("4", 1, year=2020),
    ]
    backend.replace_papers(rows_for(papers))
    assert ids(backend.fetch(Filter(min_year=2000))) == ["2", "4_s0", "4_s1"]
    assert ids(backend.fetch(Filter(max_year=2010))) == ["1", "2"]
    assert ids(backend.fetch(Filter(min_year=2000, max_year=2015))) == ["2"]
    assert ids(backend.fetch(Filter(has_full_text=True))) == ["4_s0", "4_s1"]
    assert ids(backend.fetch(Filter(has_full_text=False))) == ["1", "2", "3"]
    assert ids(backend.fetch(Filter(pmids=("3", "1")))) == ["1", "3"]
    assert backend.fetch(Filter(pmids=())) == []
    hits = backend.semantic_candidates(unit_vectors(1, DIM), 10, Filter(min_year=2000))[0]
    assert sorted(ids(hits)) == ["2", "4_s0", "4_s1"]
    row = backend.fetch(Filter(pmids=("3",)))[0]
    assert row["year"] is None and row["similarity"] is None
    assert row["title"] == "Title of 3" and row["doi"] == "10.1000/3"


def test_semantic_fan_out_returns_one_list_per_vector(backend):
    vectors = unit_vectors(6, DIM, seed=3)
    backend.replace_papers(make_rows([chunk(str(i)) for i in range(6)], vectors))
    queries = vectors[[4, 0, 2]]
    lists = backend.semantic_candidates(queries, 3)
    assert len(lists) == 3
    for query, hits, own in zip(queries, lists, ["4", "0", "2"], strict=True):
        assert len(hits) == 3
        assert hits[0]["chunk_id"] == own and hits[0]["similarity"] == pytest.approx(1, abs=1e-5)
        sims = [h["similarity"] for h in hits]
        assert sims == sorted(sims, reverse=True)
        assert ids(backend.semantic_candidates(query[None, :], 3)[0]) == ids(hits)


def test_substring_candidates_are_in_semantic_order(backend):
    vectors = unit_vectors(5, DIM, seed=4)
    docs = ["has KEY", "no", "KEY too", "also KEY", "nothing"]
    backend.replace_papers(
        make_rows([chunk(str(i), document=d) for i, d in enumerate(docs)], vectors)
    )
    query = vectors[3]
    found, other = backend.substring_candidates(["KEY", "KEY"], vectors[[3, 0]], 2)
    expected = sorted([0, 2, 3], key=lambda i: -float(vectors[i] @ query))[:2]
    assert ids(found) == [str(i) for i in expected]
    # each variant ranks by its own vector, in one call
    assert ids(other) == [
        str(i) for i in sorted([0, 2, 3], key=lambda i: -float(vectors[i] @ vectors[0]))[:2]
    ]
    for row in found:
        i = int(row["chunk_id"])
        expected = float(vectors[i] @ query)
        assert row["similarity"] == pytest.approx(expected, abs=similarity_tolerance(backend))
    assert np.isclose(found[0]["similarity"], 1.0, atol=1e-5)


def test_stage_hint_is_checked_and_keeps_the_answer(backend):
    vectors = unit_vectors(12, DIM, seed=5)
    backend.replace_papers(make_rows([chunk(str(i)) for i in range(12)], vectors))
    plain = backend.semantic_candidates(vectors[:3], 4)
    for stage in (None, "semantic", "entities"):
        hinted = backend.semantic_candidates(vectors[:3], 4, stage=stage)
        assert [ids(h) for h in hinted] == [ids(p) for p in plain]
    with pytest.raises(ValueError, match="stage must be one of"):
        backend.semantic_candidates(vectors[:1], 4, stage="keyword")


def test_a_long_pmids_filter_answers_like_the_stored_pmids_alone(backend):
    """40,000 pmids, more than SQLite binds in one statement (Chroma's metadata store refuses
    over 32,766), and spread so the stored ones sort into different pages of the list."""
    vectors = unit_vectors(6, DIM, seed=6)
    docs = ["KEY here", "KEY too", "none", "KEY also", "KEY again", "no"]
    backend.replace_papers(
        make_rows([chunk(str(i), document=d) for i, d in enumerate(docs)], vectors)
    )
    stored = ("1", "3", "4")
    short, long = Filter(pmids=stored), Filter(pmids=(*map(str, range(100, 40_100)), *stored))
    assert ids(backend.fetch(long)) == ids(backend.fetch(short)) == ["1", "3", "4"]
    for n in (1, 2, 5):
        assert [ids(h) for h in backend.semantic_candidates(vectors[[0, 5]], n, long)] == [
            ids(h) for h in backend.semantic_candidates(vectors[[0, 5]], n, short)
        ]
        assert [ids(h) for h in backend.substring_candidates(["KEY"], vectors[[2]], n, long)] == [
            ids(h) for h in backend.substring_candidates(["KEY"], vectors[[2]], n, short)
        ]
    assert backend.contains(["KEY"], long)
    assert not backend.contains(["none"], long)
