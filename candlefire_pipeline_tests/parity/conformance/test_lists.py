"""When two stage lists agree, and when a recording's differences are its store's ANN misses."""

from __future__ import annotations

import pytest

from candlefire_pipeline.parity.conformance.lists import compare_lists, explain_misses
from candlefire_pipeline.retrieval.stages import merged


def rows(*items: tuple[str, float]) -> list[tuple[str, str, float]]:
    """(chunk id, similarity) -> (pmid, chunk id, similarity); chunk "p_s1" belongs to pmid p."""
    return [(chunk.split("_")[0], chunk, sim) for chunk, sim in items]


@pytest.mark.parametrize(
    ("ours", "theirs", "verdict", "swaps"),
    [
        (rows(("a", 0.9), ("b", 0.8)), rows(("a", 0.9), ("b", 0.8)), "identical", 0),
        # rows within 1e-5 in the other order: a tie swap, counted
        (rows(("a", 0.800004), ("b", 0.8)), rows(("b", 0.800001), ("a", 0.800003)),
         "identical", 2),
        # ... but not 2e-5 apart (a row's own similarity must agree too)
        (rows(("a", 0.80002), ("b", 0.8)), rows(("b", 0.80002), ("a", 0.8)), "differs", 0),
        (rows(("a", 0.80002), ("b", 0.8)), rows(("a", 0.8), ("b", 0.8)), "differs", 0),
        # at a cut, the other of two tied rows was kept
        (rows(("a", 0.9), ("x", 0.5)), rows(("a", 0.9), ("y", 0.5)), "identical", 1),
        # the same paper through another chunk of equal similarity
        (rows(("a_s1", 0.7),), rows(("a_s2", 0.7),), "identical", 1),
        # a row more, a row less, or a real similarity difference
        (rows(("a", 0.9), ("b", 0.8)), rows(("a", 0.9)), "differs", 0),
        (rows(("a", 0.9)), rows(("a", 0.9), ("b", 0.8)), "differs", 0),
        (rows(("a", 0.9)), rows(("a", 0.91)), "differs", 0),
        ([], [], "identical", 0),
    ],
)  # fmt: skip
def test_compare_lists(ours, theirs, verdict, swaps):
    check = compare_lists(ours, theirs)
    assert (check.verdict, check.swaps) == (verdict, swaps)
    assert bool(check.detail) == (verdict == "differs")


def pool(key: str, *items: tuple[str, float]) -> list[dict]:
    return [{"pmid": c.split("_")[0], "chunk_id": c, "similarity": s, "source": key}
            for c, s in items]  # fmt: skip


#: one sub-query's exact candidates; the stage keeps the best 3 chunks, best per paper
POOLS = {"q": pool("q", ("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5))}


def top3(pools):
    return merged([pools["q"][:3]])


@pytest.mark.parametrize(
    ("recording", "misses"),
    [
        (rows(("a", 0.9), ("b", 0.8), ("c", 0.7)), 0),  # the exact answer itself
        (rows(("a", 0.9), ("c", 0.7), ("d", 0.6)), 1),  # b was missed, d came in
        (rows(("c", 0.7), ("d", 0.6), ("e", 0.5)), 2),  # a and b missed
        (rows(("a", 0.9), ("b", 0.8)), None),  # a store returns all it is asked for
        (rows(("a", 0.9), ("z", 0.85), ("b", 0.8)), None),  # a row the exact answer lacks
        (rows(("b", 0.8), ("a", 0.9), ("c", 0.7)), None),  # out of similarity order
    ],
)
def test_explain_misses(recording, misses):
    assert explain_misses(recording, POOLS, top3, cut=3) == misses


def test_a_missed_duplicate_lets_a_deeper_paper_in():
    """The recording's store missed the second chunk of paper a, so paper c made its top 3."""
    pools = {"q": pool("q", ("a_s0", 0.9), ("a_s1", 0.85), ("b", 0.8), ("c", 0.7))}
    recording = rows(("a_s0", 0.9), ("b", 0.8), ("c", 0.7))
    assert explain_misses(recording, pools, top3, cut=3) == 1
