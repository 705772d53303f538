"""The scale benchmarks' corpus stream and exact matrix oracle: the stream regenerates exactly the
rows whose vectors the oracle holds, and the oracle answers as the memory backend (the exact
oracle of the parity report) does, with every Filter."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from benchmarks import bench_effort, bench_scale, filter_cases, scale_report
from benchmarks.matrix_oracle import MatrixOracle
from benchmarks.retrieval_data import synthetic_corpus
from benchmarks.scale_corpus import build_corpus
from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import HashingEmbedder

SIZE = 2_500


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path_factory.mktemp("bench")))
    made: list[pa.Table] = []
    corpus = build_corpus(HashingEmbedder(dim=32), SIZE, consume=made.append)
    monkeypatch.undo()
    return corpus, pa.concat_tables(made)


@pytest.fixture(scope="module")
def memory(corpus):
    _, rows = corpus
    store = build_backend("memory")
    store.ensure_schema("hashing-v1", 32)
    store.replace_papers(rows)
    return store


def test_slices_regenerate_the_rows_the_corpus_holds(corpus):
    scale, rows = corpus
    again = pa.concat_tables(list(scale.slices(rows=700)))
    assert again.num_rows == rows.num_rows == SIZE
    assert again["chunk_id"].to_pylist() == list(scale.chunk_ids)
    assert again["document"].equals(rows["document"])
    matrix = again["embedding"].combine_chunks().flatten().to_numpy().reshape(SIZE, -1)
    assert np.array_equal(matrix, scale.vectors)
    years = [np.nan if y is None else y for y in again["year"].to_pylist()]
    assert np.array_equal(np.asarray(years, dtype=float), scale.years, equal_nan=True)


def test_the_stream_is_bench_retrievals_corpus(corpus):
    scale, rows = corpus
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
def test_oracle_answers_as_the_memory_backend(corpus, memory, where):
    scale, _ = corpus
    oracle = MatrixOracle(scale, memory)
    queries = scale.vectors[[5, 700, 1900]] + 0.05
    ours = oracle.semantic_candidates(queries, 25, where)
    theirs = memory.semantic_candidates(queries, 25, where)
    for got, ref in zip(ours, theirs, strict=True):
        assert [r["chunk_id"] for r in got] == [r["chunk_id"] for r in ref]
        assert [r["document"] for r in got] == [r["document"] for r in ref]
        assert np.allclose([r["similarity"] for r in got], [r["similarity"] for r in ref],
                           atol=1e-6)  # fmt: skip
    if where == Filter(min_year=2030):
        assert ours == [[], [], []]


def test_oracle_delegates_every_other_call_to_the_store(corpus, memory):
    scale, _ = corpus
    oracle = MatrixOracle(scale, memory)
    term = scale.codes_in_abstracts[0]
    assert oracle.contains([term]) == memory.contains([term])
    assert oracle.count() == SIZE


@pytest.mark.parametrize("target", [0.5, 0.1, 0.01])
def test_filter_cases_reach_their_selectivity(corpus, memory, target):
    scale, _ = corpus
    oracle = MatrixOracle(scale, memory)
    years, pmids = filter_cases.year_case(oracle, target), filter_cases.pmid_case(oracle, target)
    assert years.where.min_year is not None and pmids.where.pmids
    # pmids: whole papers until the target is reached (a paper holds at most 6 chunks)
    assert target * SIZE <= pmids.matching <= target * SIZE + 6
    # years: the closest range (with has_full_text=false if needed), within a factor of 2 here
    assert 0.5 <= years.selectivity / target <= 2
    assert years.matching == int(oracle.mask(years.where).sum())


def test_filtered_queries_on_the_exact_store_have_full_recall(corpus, memory):
    scale, _ = corpus
    oracle = MatrixOracle(scale, memory)
    case = filter_cases.pmid_case(oracle, 0.01)
    got = filter_cases.measure(memory, oracle, case, scale.vectors[[1, 2]])
    assert got["recall"] == 1.0
    assert got["rows_min"] == got["expected"] == min(filter_cases.LIMIT, case.matching)
    assert got["queries"] == got["asked"] == 2


def test_a_spent_case_budget_stops_after_the_query_that_spent_it(corpus, memory):
    """A slow store (Qdrant local mode on a long pmids list) runs at least one query per case,
    then stops: the result says how many of the asked queries it measured."""
    scale, _ = corpus
    oracle = MatrixOracle(scale, memory)
    case = filter_cases.year_case(oracle, 0.1)
    got = filter_cases.measure(memory, oracle, case, scale.vectors[[1, 2, 3]], budget_s=0.0)
    assert (got["queries"], got["asked"], len(got["seconds"])) == (1, 3, 1)
    assert got["recall"] == 1.0


def test_effort_choice_is_the_smallest_that_clears_the_target_on_every_build():
    points = [
        {"ef": (200, ef), "final": final, "build": build}
        for build, finals in enumerate(([0.97, 0.995, 1.0], [0.995, 0.992, 1.0]))
        for ef, final in zip((20, 40, 100), finals, strict=True)
    ]
    # 20 fails build 0; 40 fails build 1 (0.992 < 0.993); 100 clears both
    assert bench_effort.smallest(points, "entities", builds=2) == 100
    assert bench_effort.smallest(points[:2], "entities", builds=2) == 40  # nothing clears: top


def test_build_exponent_of_the_cost_curve():
    assert scale_report.exponent([1_000, 10_000], [2.0, 20.0]) == pytest.approx(1.0)
    assert scale_report.exponent([1_000, 10_000], [2.0, 200.0]) == pytest.approx(2.0)
    assert np.isnan(scale_report.exponent([1_000], [2.0]))


def test_a_partial_run_keeps_the_sizes_earlier_figures(tmp_path):
    path = tmp_path / "1000000.json"
    earlier = {
        "layouts": {"vector": "v0", "halfvec": "h0", "binary": "b0"}, "efforts": [],
        "chroma": {"load": "c0"}, "load_note": "quiet (04:03)",
    }  # fmt: skip
    now = {"layouts": {"vector": "v1"}, "efforts": ["e1"], "load_note": "quiet (05:40)."}
    assert bench_scale.merged(dict(now), tmp_path / "none.json") == now  # nothing earlier
    path.write_text(json.dumps(earlier))
    result = bench_scale.merged(dict(now), path)
    assert result["layouts"] == {"vector": "v1", "halfvec": "h0", "binary": "b0"}
    assert result["efforts"] == ["e1"] and result["chroma"] == {"load": "c0"}
    assert result["load_note"] == (
        "quiet (05:40). Kept from an earlier run (halfvec, binary, Chroma): quiet (04:03)"
    )


@pytest.mark.parametrize(("finals", "said"), [
    ((0.97, 0.98), "No measured ef reached 0.99 at 1,000,000."),
    ((0.97, 0.995), "ef 1000 / 1000 reaches **0.9950**"),
])  # fmt: skip
def test_the_recall_bound_names_the_smallest_ef_that_reached_the_goal(finals, said):
    query = {"recall": {"final": 0.95, "semantic": 0.9, "entities": 0.92},
             "stage_p50": {"entities": 0.3}, "stage_p95": {"entities": 1.2}}  # fmt: skip
    efforts = [
        {"ef_search": ef, "ef_search_entities": ef,
         "query": {**query, "recall": {**query["recall"], "final": final}}}
        for ef, final in zip((400, 1000), finals, strict=True)
    ]  # fmt: skip
    result = {"size": 1_000_000, "layouts": {"vector": {"query": query}}, "efforts": efforts}
    text = scale_report._recall_bound([result])
    assert "semantic 0.9000, entities 0.9200" in text and said in text
