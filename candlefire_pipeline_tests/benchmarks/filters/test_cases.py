"""The filters benchmark's cases: filters of a target selectivity, and one store's answers to them
measured against the exact oracle (with a time budget per case)."""

from __future__ import annotations

import pytest

from benchmarks.common.matrix_oracle import MatrixOracle
from benchmarks.filters import cases as filter_cases
from candlefire_pipeline_tests.benchmarks.conftest import SIZE


@pytest.mark.parametrize("target", [0.5, 0.1, 0.01])
def test_filter_cases_reach_their_selectivity(scaled_corpus, scaled_memory, target):
    scale, _ = scaled_corpus
    oracle = MatrixOracle(scale, scaled_memory)
    years, pmids = filter_cases.year_case(oracle, target), filter_cases.pmid_case(oracle, target)
    assert years.where.min_year is not None and pmids.where.pmids
    # pmids: whole papers until the target is reached (a paper holds at most 6 chunks)
    assert target * SIZE <= pmids.matching <= target * SIZE + 6
    # years: the closest range (with has_full_text=false if needed), within a factor of 2 here
    assert 0.5 <= years.selectivity / target <= 2
    assert years.matching == int(oracle.mask(years.where).sum())


def test_filtered_queries_on_the_exact_store_have_full_recall(scaled_corpus, scaled_memory):
    scale, _ = scaled_corpus
    oracle = MatrixOracle(scale, scaled_memory)
    case = filter_cases.pmid_case(oracle, 0.01)
    got = filter_cases.measure(scaled_memory, oracle, case, scale.vectors[[1, 2]])
    assert got["recall"] == 1.0
    assert got["rows_min"] == got["expected"] == min(filter_cases.LIMIT, case.matching)
    assert got["queries"] == got["asked"] == 2


def test_a_spent_case_budget_stops_after_the_query_that_spent_it(scaled_corpus, scaled_memory):
    """A slow store (Qdrant local mode on a long pmids list) runs at least one query per case,
    then stops: the result says how many of the asked queries it measured."""
    scale, _ = scaled_corpus
    oracle = MatrixOracle(scale, scaled_memory)
    case = filter_cases.year_case(oracle, 0.1)
    got = filter_cases.measure(scaled_memory, oracle, case, scale.vectors[[1, 2, 3]], budget_s=0.0)
    assert (got["queries"], got["asked"], len(got["seconds"])) == (1, 3, 1)
    assert got["recall"] == 1.0
