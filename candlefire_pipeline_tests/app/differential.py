"""Comparing one call's answer from the real Chroma collection with the serving collection's.

Identical keys in Chroma's order, ids in identical order, identical documents, metadatas, uris,
`included` and `data`; distances within 1e-5; embeddings within 1e-6 (Chroma hands back its
cosine index's re-normalized float32, one ulp off the stored vector at most). Two ids may trade
places only when their distances are within 1e-5 of each other, and a list cut in the middle of
such a tie may hold a different member of it (Chroma's graph walk orders equal distances its own
way; the serving collection orders them by insertion).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DISTANCE = 1e-5
VECTOR = 1e-6


@dataclass
class Tally:
    """What the comparisons saw (the suite asserts the calls were not vacuous)."""

    calls: int = 0
    answered: int = 0
    refused_alike: int = 0
    unsupported: int = 0
    nonempty: int = 0
    tie_swaps: int = 0
    kinds: dict = field(default_factory=dict)


def _by_id(ids: list, values: list | None) -> dict:
    return {} if values is None else dict(zip(ids, values, strict=True))


def _same_vectors(expected, got, where: str) -> None:
    if expected is None or got is None:
        assert expected is None and got is None, where
        return
    assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, where
    assert got.shape == expected.shape, f"{where}: {got.shape} != {expected.shape}"
    assert np.allclose(got, expected, rtol=0.0, atol=VECTOR), where


def same_list(expected: dict, got: dict, q: int | None, tally: Tally, where: str,
              oracle=None) -> None:  # fmt: skip
    """One result list (a get's, or query list q) compared, ties allowed as the module says;
    `oracle(ids)` gives the exact distances when the answers do not include them."""

    def pick(answer, key):
        value = answer.get(key)  # a get has no distances
        return value if value is None or q is None else value[q]

    e_ids, g_ids = pick(expected, "ids"), pick(got, "ids")
    assert len(g_ids) == len(e_ids), f"{where}: {len(g_ids)} ids, Chroma {len(e_ids)}"
    e_d, g_d = pick(expected, "distances"), pick(got, "distances")
    if e_ids != g_ids:
        assert q is not None, f"{where}: get ids differ: {g_ids} != Chroma {e_ids}"
        tie_e, tie_g = (e_d, g_d) if e_d is not None else (oracle(e_ids), oracle(g_ids))
        _ties_only(e_ids, g_ids, tie_e, tie_g, where)
        tally.tie_swaps += 1
    tally.nonempty += bool(e_ids)
    for key in ("documents", "metadatas", "uris"):
        assert (pick(got, key) is None) == (pick(expected, key) is None), f"{where}: {key}"
        e, g = _by_id(e_ids, pick(expected, key)), _by_id(g_ids, pick(got, key))
        assert {i: g[i] for i in e if i in g} == {i: e[i] for i in e if i in g}, f"{where}: {key}"
    if e_d is not None:
        assert np.allclose(g_d, e_d, rtol=0.0, atol=DISTANCE), f"{where}: distances"
        shared = _by_id(g_ids, g_d)
        for i, d in _by_id(e_ids, e_d).items():
            if i in shared:
                assert abs(shared[i] - d) <= DISTANCE, f"{where}: distance of {i}"


def _ties_only(e_ids, g_ids, e_d, g_d, where: str) -> None:
    """Different ids may only sit where the distances tie (within DISTANCE)."""
    for k, (e, g) in enumerate(zip(e_ids, g_ids, strict=True)):
        if e == g:
            continue
        assert abs(e_d[k] - g_d[k]) <= DISTANCE, f"{where}: {g} at {k} instead of {e}"
        if g not in e_ids:  # cut inside a tie: the last kept distance ties with it
            assert abs(g_d[k] - e_d[-1]) <= DISTANCE, f"{where}: {g} is not in Chroma's list"


def same_answer(expected: dict, got: dict, kind: str, tally: Tally, where: str,
                oracle=None) -> None:  # fmt: skip
    """`oracle(q, ids)`: exact distances of ids to query q (ties of answers without distances)."""
    assert list(got) == list(expected), f"{where}: keys {list(got)} != {list(expected)}"
    assert got["included"] == expected["included"], where
    assert got["data"] is None and expected["data"] is None, where
    if kind == "get":
        same_list(expected, got, None, tally, where)
        _same_vectors(expected["embeddings"], got["embeddings"], where)
        return
    assert len(got["ids"]) == len(expected["ids"]), f"{where}: query lists"
    for key in ("documents", "metadatas", "uris", "distances", "embeddings"):
        assert (got[key] is None) == (expected[key] is None), f"{where}: {key} included"
    for q in range(len(expected["ids"])):
        exact = None if oracle is None else (lambda ids, q=q: oracle(q, ids))
        same_list(expected, got, q, tally, f"{where} [query {q}]", exact)
        if expected["embeddings"] is not None:
            _vectors_by_id(expected, got, q, where)


def _vectors_by_id(expected: dict, got: dict, q: int, where: str) -> None:
    e, g = expected["embeddings"][q], got["embeddings"][q]
    assert isinstance(g, np.ndarray) and g.dtype == e.dtype and g.shape == e.shape, where
    rows = {i: r for i, r in zip(got["ids"][q], g, strict=True)}
    for i, row in zip(expected["ids"][q], e, strict=True):
        if i in rows:
            assert np.allclose(rows[i], row, rtol=0.0, atol=VECTOR), f"{where}: vector of {i}"
