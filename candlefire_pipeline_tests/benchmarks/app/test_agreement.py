"""Whether two arms of the app benchmark answered alike: tied rows may swap (or another member
of a tie end a list), anything else differs; a request's difference is put down to an HNSW walk
only where a stage's members differ, and blamed on the arm whose list is not the exact one."""

from __future__ import annotations

import pytest

from benchmarks.app.agreement import (
    DIFFER,
    IDENTICAL,
    TIES,
    UNEXPLAINED,
    WALK,
    Verdict,
    ranked_alike,
    summary,
    verdict,
)
from benchmarks.app.search_path import Answer


def rows(*spec: tuple[str, float], title: str = "T") -> list[dict]:
    return [{"chunk_id": cid, "pmid": cid.split("_")[0], "title": title, "similarity": s}
            for cid, s in spec]  # fmt: skip


BASE = rows(("a", 0.9), ("b", 0.8), ("c", 0.7))


@pytest.mark.parametrize(
    ("got", "expected_verdict"),
    [
        (rows(("a", 0.9), ("b", 0.8), ("c", 0.7)), IDENTICAL),
        (rows(("a", 0.9), ("b", 0.8), ("c", 0.7 + 4e-6)), IDENTICAL),  # within TIE
        (rows(("a", 0.9), ("c", 0.8), ("b", 0.7)), DIFFER),  # scores moved with the rows
        (rows(("a", 0.9), ("b", 0.8), ("d", 0.7 + 1e-6)), TIES),  # another member at the cut
        (rows(("a", 0.9), ("x", 0.8), ("c", 0.7)), DIFFER),  # a stranger inside the list
        (rows(("a", 0.9), ("b", 0.8)), DIFFER),  # shorter
        (rows(("a", 0.9), ("b", 0.8), ("c", 0.69)), DIFFER),  # a score beyond TIE
        (rows(("a", 0.9), ("b", 0.8), ("c", 0.7), title="other"), DIFFER),  # content
    ],
)
def test_ranked_lists_agree_only_up_to_ties(got, expected_verdict):
    assert ranked_alike(BASE, got, "chunk_id", "similarity") == expected_verdict


def test_tied_rows_may_swap_places():
    tied = rows(("a", 0.9), ("b", 0.9 + 3e-6), ("c", 0.7))
    swapped = rows(("b", 0.9 + 3e-6), ("a", 0.9), ("c", 0.7))
    assert ranked_alike(tied, swapped, "chunk_id", "similarity") == TIES
    assert ranked_alike([], [], "chunk_id", "similarity") == IDENTICAL


def answer(search=BASE, fused=None, grounding=None, texts=None) -> Answer:
    fused = fused if fused is not None else [{"pmid": "a", "rrf_score": 0.03}]
    return Answer(search=search, entities=rows(("e", 0.5)), keyword=[],
                  grounding=grounding or {"SOD1": (True, False)}, fused=fused,
                  texts=texts or {"a": "text"}, paper=None)  # fmt: skip


OTHER_NEIGHBOUR = rows(("a", 0.9), ("b", 0.8), ("z", 0.75))


@pytest.mark.parametrize(
    ("chroma", "pgvector", "exact", "expected"),
    [
        (answer(), answer(), None, Verdict(IDENTICAL)),
        # tied rows swapped in a stage move the fusion: still alike
        (answer(), answer(search=rows(("a", 0.9), ("b", 0.8), ("d", 0.7)),
                          fused=[{"pmid": "a", "rrf_score": 0.029}]), answer(),
         Verdict(TIES)),
        # Chroma's walk found another neighbour: pgvector's list is the exact one
        (answer(search=OTHER_NEIGHBOUR), answer(), answer(),
         Verdict(WALK, ("search",), ("Chroma",))),
        (answer(search=OTHER_NEIGHBOUR), answer(), None, Verdict(WALK, ("search",), ())),
        # grounding has no ranking: a difference there is never a walk's
        (answer(), answer(grounding={"SOD1": (False, False)}), answer(), Verdict(UNEXPLAINED)),
        # the same stages and fusion, other texts read
        (answer(), answer(texts={"a": "other"}), answer(), Verdict(UNEXPLAINED)),
        # identical stages fused otherwise
        (answer(), answer(fused=[{"pmid": "b", "rrf_score": 0.03}]), answer(),
         Verdict(UNEXPLAINED)),
    ],
)  # fmt: skip
def test_a_requests_difference_is_explained_or_flagged(chroma, pgvector, exact, expected):
    assert verdict({"Chroma": chroma, "pgvector": pgvector}, exact) == expected


def test_the_summary_counts_each_kind_and_whom_a_walk_is_put_down_to():
    verdicts = [Verdict(IDENTICAL)] * 3 + [Verdict(TIES), Verdict(UNEXPLAINED)] + [
        Verdict(WALK, ("search",), ("Chroma",)),
        Verdict(WALK, ("entities", "search"), ("Chroma", "pgvector")),
    ]  # fmt: skip
    text = summary(verdicts, ("Chroma", "pgvector"))
    assert text.startswith("3 of 7 requests answered identically by Chroma and pgvector, 1 alike")
    assert "2 differ where an HNSW walk found other neighbours" in text
    assert "stage: search 2, entities 1" in text
    assert "Chroma 1, both 1" in text
    assert text.endswith("; 1 unexplained.")
