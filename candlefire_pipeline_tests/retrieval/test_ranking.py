"""RRF fusion, recency factor and citation boost, checked against hand-worked arithmetic."""

from __future__ import annotations

import itertools
import math

import pytest

from candlefire_pipeline.retrieval import best_per_pmid
from candlefire_pipeline.retrieval.fetch import top_k
from candlefire_pipeline.retrieval.ranking import apply_citation_boost, recency_factor, rrf_merge


def row(pmid: str, similarity: float | None = 0.5, chunk: str = "", **extra) -> dict:
    return {"pmid": pmid, "chunk_id": chunk or pmid, "similarity": similarity, **extra}


def test_rrf_scores_and_tie_order_by_hand():
    lists = [
        [row("A", 0.5), row("B"), row("C")],
        [row("B"), row("D")],
        [row("C"), row("A", 0.9, chunk="A_s2")],
    ]
    merged = rrf_merge(lists, k=10, top=20)
    # A: ranks 1 and 2 -> 1/11 + 1/12; B: ranks 2 and 1 -> the same sum, a tie that A wins
    # because it appears first; C: ranks 3 and 1 -> 1/13 + 1/11; D: rank 2 -> 1/12.
    assert [r["pmid"] for r in merged] == ["A", "B", "C", "D"]
    assert merged[0]["rrf_score"] == merged[1]["rrf_score"]
    # candle-fire rounds the reported score to 6 decimals (the order uses the exact sums)
    assert merged[0]["rrf_score"] == round(1 / 11 + 1 / 12, 6)
    assert merged[2]["rrf_score"] == round(1 / 13 + 1 / 11, 6)
    assert merged[3]["rrf_score"] == round(1 / 12, 6)
    # the dict kept for A is its most similar one, from the third list
    assert merged[0]["chunk_id"] == "A_s2" and merged[0]["similarity"] == 0.9


@pytest.mark.parametrize(
    ("lists", "k", "top", "expected"),
    [
        ([["A", "B"], ["A"]], 10, 2, ["A", "B"]),
        ([["A", "B"], ["A"]], 10, 1, ["A"]),
        ([["A", "B"], ["A"]], 10, 0, []),
        # k=0: X = 1 + 1/2 = 1.5, Y = 1/2 + 1/2 + 1 = 2.0, Z = 1 -> Y, X, Z
        ([["X", "Y"], ["Z", "Y"], ["Y", "X"]], 0, 3, ["Y", "X", "Z"]),
        # k=60 flattens ranks: B at ranks 2+2 (2/62) beats A at rank 1 once (1/61)
        ([["A", "B"], ["C", "B"]], 60, 3, ["B", "A", "C"]),
    ],
)
def test_rrf_k_and_top(lists, k, top, expected):
    ranked = [[row(pmid) for pmid in pmids] for pmids in lists]
    assert [r["pmid"] for r in rrf_merge(ranked, k=k, top=top)] == expected


def test_rrf_counts_a_pmid_once_per_list_but_keeps_positions():
    merged = rrf_merge([[row("A"), row("A"), row("B")]], k=10)
    scores = {r["pmid"]: r["rrf_score"] for r in merged}
    assert scores == pytest.approx({"A": 1 / 11, "B": 1 / 13})


def test_rrf_does_not_mutate_inputs_and_handles_empty_lists():
    first = row("A")
    merged = rrf_merge([[], [first], []])
    assert "rrf_score" not in first and merged[0]["rrf_score"] == pytest.approx(1 / 11)
    assert rrf_merge([]) == []


def test_rrf_none_similarity_loses_to_a_number():
    merged = rrf_merge([[row("A", None, chunk="plain")], [row("A", 0.1, chunk="scored")]])
    assert merged[0]["chunk_id"] == "scored"


# candle-fire's factor: 1 + 0.5 * max(0, year - 1990) / 35, a missing year counting as 1990.
@pytest.mark.parametrize(
    ("year", "expected"),
    [
        (None, 1.0),  # missing -> 1990
        (0, 1.0),  # 0 is how some corpora write "unknown"
        (1950, 1.0),  # before 1990: no negative boost
        (1990, 1.0),
        (2011, 1.3),  # 21/35 of the way -> 1 + 0.5 * 0.6
        (2025, 1.5),
        (2026, 1.0 + 0.5 * 36 / 35),  # 1.5142857...: not capped
        (2031, 1.0 + 0.5 * 41 / 35),  # 1.5857142...
        (2100, 1.0 + 0.5 * 110 / 35),  # 2.5714285...
    ],
)
def test_recency_factor_linear_and_not_capped(year, expected):
    assert recency_factor(year) == pytest.approx(expected, abs=1e-12)


def test_recency_factor_2026_is_candle_fires_1_514():
    assert round(recency_factor(2026), 3) == 1.514


def test_recency_factor_custom_window_and_bad_window():
    assert recency_factor(2005, start=2000, end=2010, end_factor=3.0) == pytest.approx(2.0)
    assert recency_factor(2015, start=2000, end=2010, end_factor=3.0) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        recency_factor(2000, start=2010, end=2010)


@pytest.mark.parametrize(
    ("rerank_score", "citations", "year", "expected"),
    [
        (2.0, 0, 1990, 2.0 * math.log(2)),
        (2.0, 5, 2025, 2.0 * math.log(7) * 1.5),
        (2.0, 5, 2026, 2.0 * math.log(7) * (1.0 + 0.5 * 36 / 35)),
        (0.5, 100, 2011, 0.5 * math.log(102) * 1.3),
        (1.0, None, None, math.log(2)),
    ],
)
def test_citation_boost_formula(rerank_score, citations, year, expected):
    [boosted] = apply_citation_boost(
        [row("A", rerank_score=rerank_score, citation_count=citations, year=year)]
    )
    assert boosted["final_score"] == pytest.approx(expected)


def test_citation_boost_reorders_and_is_stable():
    rows = [
        row("new", rerank_score=1.0, citation_count=0, year=2025),  # ln 2 x 1.5 = 1.040
        row("cited", rerank_score=1.0, citation_count=1, year=1990),  # ln 3 = 1.099
        row("twin1", rerank_score=0.5, citation_count=3, year=2000),
        row("twin2", rerank_score=0.5, citation_count=3, year=2000),
    ]
    assert [r["pmid"] for r in apply_citation_boost(rows)] == ["cited", "new", "twin1", "twin2"]


def test_citation_boost_needs_a_rerank_score():
    with pytest.raises(ValueError, match="rerank_score"):
        apply_citation_boost([row("A", citation_count=1, year=2000)])


@pytest.mark.parametrize(
    ("similarities", "expected"),
    [
        # float32 noise between stores (~1e-7) is a tie: broken by pmid, the same on every store
        ({"b": 0.9000001, "a": 0.9}, ["a", "b"]),
        ({"a": 0.9, "b": 0.9000001}, ["a", "b"]),
        # a tie straddling a rounding line (6 decimals) is still a tie
        ({"b": 0.8999996, "a": 0.9000004}, ["a", "b"]),
        ({"a": 0.8999996, "b": 0.9000004}, ["a", "b"]),
        # ties chain: c is within the tolerance of b, b of a
        ({"c": 0.900004, "b": 0.900002, "a": 0.9}, ["a", "b", "c"]),
        # a real difference still orders by similarity
        ({"a": 0.9, "b": 0.90001}, ["b", "a"]),
        # the best chunk of a pmid represents it
        ({"a": 0.5, "b": 0.7, "a#2": 0.8}, ["a", "b"]),
    ],
)
def test_best_per_pmid_orders_near_ties_the_same_on_every_store(similarities, expected):
    rows = [
        {"pmid": key.split("#")[0], "chunk_id": key, "similarity": value}
        for key, value in similarities.items()
    ]
    assert [row["pmid"] for row in best_per_pmid(rows)] == expected


def test_a_near_tie_within_a_paper_keeps_its_lowest_chunk_on_every_store():
    first = [
        {"pmid": "p", "chunk_id": "p#2", "similarity": 0.8000001},
        {"pmid": "p", "chunk_id": "p#1", "similarity": 0.8},
    ]
    second = [{**first[0], "similarity": 0.8}, {**first[1], "similarity": 0.8000002}]
    assert best_per_pmid(first)[0]["chunk_id"] == best_per_pmid(second)[0]["chunk_id"] == "p#1"


def _hits(similarities: dict[str, float]) -> list[dict]:
    return [{"pmid": k, "chunk_id": k, "similarity": v} for k, v in similarities.items()]


class TieCuttingStore:
    """Answers top-n requests over fixed similarities, picking among tied rows at the cut by its
    own whim (reverse id order), and counts the requests."""

    def __init__(self, similarities: dict[str, float]) -> None:
        self.rows = sorted(_hits(similarities), key=lambda r: (-r["similarity"], r["chunk_id"]))
        self.rows = sorted(self.rows, key=lambda r: -r["similarity"])  # ties: reverse id order
        self.rows = [
            r for _, group in itertools.groupby(self.rows, key=lambda r: r["similarity"])
            for r in sorted(group, key=lambda r: r["chunk_id"], reverse=True)
        ]  # fmt: skip
        self.limits: list[int] = []

    def ask(self, indices, limit: int) -> list[list[dict]]:
        self.limits.append(limit)
        return [self.rows[:limit] for _ in indices]


# a store holding a at .9 and 20 chunks tied at .5 (t00..t19), and z at .1
TIED = {"a": 0.9, **{f"t{i:02d}": 0.5 for i in range(20)}, "z": 0.1}


@pytest.mark.parametrize(
    ("similarities", "keep", "expected", "requests"),
    [
        # the store returned less than asked: it holds nothing more
        ({"a": 0.9, "b": 0.5, "c": 0.5}, 2, ["a", "b"], 1),
        # a tie at the cut that ends inside the answer is cut by id, one request
        ({"a": 0.9, "c": 0.5, "b": 0.5, "d": 0.1, **{f"e{i}": 0.05 for i in range(9)}}, 2,
         ["a", "b"], 1),
        # a tie group reaching past the answer: asked again until it closes, then cut by id
        (TIED, 3, ["a", "t00", "t01"], 2),
        # ... unless the store returned all it holds
        (TIED, 21, ["a", *[f"t{i:02d}" for i in range(20)]], 1),
        # everything tied: asked again for all of them
        ({f"u{i:02d}": 0.5 for i in range(12)}, 1, ["u00"], 2),
        ({}, 3, [], 1),
    ],
)  # fmt: skip
def test_top_k_keeps_exactly_k_rows_whatever_tied_chunks_a_store_picked(
    similarities, keep, expected, requests
):
    store = TieCuttingStore(similarities)
    (found,) = top_k(store.ask, 1, keep)
    assert [row["pmid"] for row in found] == expected
    assert len(store.limits) == requests


def test_top_k_asks_again_only_for_the_sub_queries_with_an_open_tie():
    tied, clear = TieCuttingStore(TIED), TieCuttingStore({"a": 0.9, "b": 0.8, "c": 0.1})
    asked: list[tuple[list[int], int]] = []

    def ask(indices, limit):
        asked.append((list(indices), limit))
        return [(tied if i == 0 else clear).ask([i], limit)[0] for i in indices]

    first, second = top_k(ask, 2, 3)
    assert [r["pmid"] for r in first] == ["a", "t00", "t01"]
    assert [r["pmid"] for r in second] == ["a", "b", "c"]
    assert [indices for indices, _ in asked] == [[0, 1], [0]]
