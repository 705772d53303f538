"""nDCG@10, the paired bootstrap interval and the judged-set comparison (pure functions)."""

from __future__ import annotations

import math

import pytest

from candlefire_pipeline.parity.quality import (
    JudgedQuery,
    bootstrap_interval,
    compare_rankings,
    load_judged_queries,
    ndcg_at,
)


@pytest.mark.parametrize(
    "ranked, relevant, expected",
    [
        (["a", "b"], {"a"}, 1.0),
        (["b", "a"], {"a"}, 1 / math.log2(3)),
        (["x", "y"], {"a"}, 0.0),
        (["a", "x", "b"], {"a", "b"}, (1 + 1 / 2) / (1 + 1 / math.log2(3))),
        ([f"x{i}" for i in range(10)] + ["a"], {"a"}, 0.0),  # rank 11 is past the cut-off
        (["a"], set(), 0.0),
    ],
)
def test_ndcg_at_10(ranked, relevant, expected):
    assert ndcg_at(ranked, frozenset(relevant)) == pytest.approx(expected)


def test_the_interval_of_a_constant_difference_is_that_difference():
    assert bootstrap_interval([-0.01] * 50, 500) == pytest.approx((-0.01, -0.01))


def test_the_interval_is_reproducible_covers_the_mean_and_widens_with_noise():
    quiet = [0.0, 0.01, -0.01] * 40
    noisy = [0.0, 0.3, -0.3] * 40
    low, high = bootstrap_interval(quiet, 2000)
    assert (low, high) == bootstrap_interval(quiet, 2000)
    assert low < 0.0 < high
    wide_low, wide_high = bootstrap_interval(noisy, 2000)
    assert wide_high - wide_low > 10 * (high - low)
    assert all(math.isnan(v) for v in bootstrap_interval([], 2000))


def test_only_queries_with_a_relevant_paper_in_the_corpus_count():
    queries = [
        JudgedQuery("1", "q1", frozenset({"a"})),
        JudgedQuery("2", "q2", frozenset({"b"})),
        JudgedQuery("3", "q3", frozenset({"zzz"})),  # not in the corpus: cannot be judged
    ]
    reference = [["a", "x"], ["b", "x"], ["x"]]
    candidate = [["a", "x"], ["x", "b"], ["x"]]
    result = compare_rankings("set", queries, {"a", "b", "x"}, reference, candidate, 500)
    assert (result.queries, result.judged, result.corpus_papers) == (3, 2, 3)
    assert result.reference_ndcg == pytest.approx(1.0)
    assert result.candidate_ndcg == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert result.delta == pytest.approx(result.candidate_ndcg - 1.0)
    assert result.ci_low <= result.delta <= result.ci_high
    assert [qid for qid, _, _ in result.worst] == ["2"]


def test_no_judged_query_gives_no_figures_never_a_pass():
    queries = [JudgedQuery("1", "q", frozenset({"absent"}))]
    result = compare_rankings("set", queries, {"a"}, [["a"]], [["a"]], 500)
    assert result.judged == 0 and math.isnan(result.delta)


@pytest.mark.parametrize(
    "line, error",
    [
        ('{"qid": "1", "text": "t"}', "needs qid, text and relevant"),
        ('{"qid": "1", "text": "t", "relevant": []}', "no relevant id"),
        ('{"qid": "1", "text": " ", "relevant": ["a"]}', "empty text"),
        ("not json", "needs qid, text and relevant"),
    ],
)
def test_a_bad_judged_line_is_named(tmp_path, line, error):
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": 0, "text": "ok", "relevant": [5]}\n' + line + "\n")
    with pytest.raises(ValueError, match=f"q.jsonl:2: .*{error}"):
        load_judged_queries(path)


def test_judged_queries_load_ids_as_strings(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": 0, "text": "ok", "relevant": [5, "6"]}\n\n')
    assert load_judged_queries(path) == [JudgedQuery("0", "ok", frozenset({"5", "6"}))]
