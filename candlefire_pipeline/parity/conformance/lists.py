"""Comparing a stage list with candle-fire's recorded one, and explaining the recording's misses.

Two lists agree when they have the same length and, position by position, similarities within
TOLERANCE (1e-5: the project embeds queries through another runtime than candle-fire's torch).
Where the rows at a position differ, they are a tie swap: two rows whose similarities differ by
at most the tolerance came in the other order (or, at a cut, the other one of two tied rows was
kept). Anything else is a difference.

candle-fire's recording came from Chroma's HNSW graph, which misses true neighbours now and then
(on the fixture corpus 7 of 110 semantic lists and 17 of 110 entity lists differ from an exact
search on the recording's own vectors). A list is a *reference miss* when the store's list agrees
with the exact answer and the recording is the exact answer with some chunks left out of their
sub-query's candidates: proven by re-running the stage without them (`explain_misses`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

TOLERANCE = 1e-5
#: A recording needing more left-out chunks than this is not explained as misses.
MAX_MISSES = 200

#: (pmid, chunk id, similarity or score)
Row = tuple[str, str, float]


@dataclass(frozen=True)
class ListCheck:
    verdict: str  # "identical" | "reference_miss" | "store_miss" | "differs"
    swaps: int = 0
    misses: int = 0
    detail: str = ""


def _show(row: Row | None) -> str:
    return "nothing" if row is None else f"{row[1]} ({row[2]:.6f})"


def first_difference(ours: Sequence[Row], expected: Sequence[Row], tol: float) -> int | None:
    """The first position whose similarities differ by more than tol (or only one list has a
    row), or None when the lists agree up to tie swaps."""
    for i in range(max(len(ours), len(expected))):
        if i >= len(ours) or i >= len(expected) or abs(ours[i][2] - expected[i][2]) > tol:
            return i
    return None


def compare_lists(
    ours: Sequence[Row], expected: Sequence[Row], tol: float = TOLERANCE
) -> ListCheck:
    """identical (with the number of tie swaps) or differs (with the first difference)."""
    theirs = {row[1]: row[2] for row in expected}
    for row in ours:
        if row[1] in theirs and abs(row[2] - theirs[row[1]]) > tol:
            return ListCheck(
                "differs",
                detail=f"{row[1]} has similarity {row[2]:.6f} here, {theirs[row[1]]:.6f} in "
                "candle-fire's list",
            )
    at = first_difference(ours, expected, tol)
    if at is None:
        swaps = sum(a[:2] != b[:2] for a, b in zip(ours, expected, strict=True))
        return ListCheck("identical", swaps=swaps)
    mine = ours[at] if at < len(ours) else None
    theirs = expected[at] if at < len(expected) else None
    return ListCheck(
        "differs",
        detail=f"position {at + 1}: {_show(mine)} where candle-fire has {_show(theirs)} "
        f"({len(ours)} rows vs {len(expected)})",
    )


#: sub-query key -> candidate rows in exact order, each row a dict with pmid, chunk_id,
#: similarity and the sub-query key under "source"
Pools = Mapping[str, list[dict]]
#: pools with chunks left out -> the stage's rows (dicts carrying their "source")
Stage = Callable[[Pools], list[dict]]


def _as_rows(rows: Sequence[dict]) -> list[Row]:
    return [(r["pmid"], r["chunk_id"], r["similarity"]) for r in rows]


def explain_misses(
    expected: Sequence[Row], pools: Pools, stage: Stage, cut: int, tol: float = TOLERANCE
) -> int | None:
    """How many candidate chunks the recording's store must have missed for the exact stage to
    give the recorded list, or None when no set of misses found gives it.

    Greedy, one left-out chunk per step: run the stage on the pools without the chunks left out
    so far and find the first position where it disagrees with the recording. If the exact list
    holds a more similar row there (or the recording has ended), that row's chunk was missed by
    its sub-query. If the recording holds a row the exact list lacks, it came from deeper in one
    pool (its chunk at the recorded similarity): a chunk above the pool's cut that the recording
    does not show was missed instead (the lowest such one). Misses only ever remove candidates,
    and a store still returns all the candidates it was asked for, so anything else cannot be
    explained.
    """
    left_out: dict[str, set[str]] = {}
    recorded: dict[str, list[float]] = {}
    for _, chunk_id, similarity in expected:
        recorded.setdefault(chunk_id, []).append(similarity)
    for misses in range(MAX_MISSES + 1):
        pruned = {
            key: [r for r in rows if r["chunk_id"] not in left_out.get(key, ())]
            for key, rows in pools.items()
        }
        if any(len(pruned[key]) < min(cut, len(rows)) for key, rows in pools.items()):
            return None  # the store would have returned fewer candidates than it was asked for
        rows = stage(pruned)
        at = first_difference(_as_rows(rows), expected, tol)
        if at is None:
            return misses
        if at < len(rows) and (at >= len(expected) or rows[at]["similarity"] > expected[at][2]):
            missed = (rows[at]["source"], rows[at]["chunk_id"])
        else:
            missed = _displaced(expected[at], pruned, recorded, cut, tol)
            if missed is None:
                return None
        left_out.setdefault(missed[0], set()).add(missed[1])
    return None


def _displaced(
    wanted: Row, pools: Pools, recorded: dict[str, list[float]], cut: int, tol: float
) -> tuple[str, str] | None:
    """(pool, chunk) to leave out so the recorded row `wanted` moves up into its pool's cut:
    the lowest row above the cut that the recording does not show at this pool's similarity
    (a paper kept through a more similar row of another sub-query counts as not shown)."""

    def shown(row: dict) -> bool:
        similarity = max(0.0, row["similarity"])
        return any(abs(similarity - s) <= tol for s in recorded.get(row["chunk_id"], ()))

    for key, rows in pools.items():
        at = next((i for i, r in enumerate(rows) if r["chunk_id"] == wanted[1] and shown(r)), None)
        if at is None or at < cut:
            continue
        unseen = [r for r in rows[:cut] if not shown(r)]
        if unseen:
            return key, unseen[-1]["chunk_id"]
    return None
