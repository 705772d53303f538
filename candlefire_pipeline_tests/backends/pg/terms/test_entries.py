"""The rules that keep a kept answer exact, on plain entries (no store)."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.terms.compute import walk_threshold
from candlefire_pipeline.backends.pg.terms.entries import (
    ENTITY,
    KEYWORD,
    Candidate,
    Entry,
    order_key,
    with_candidates,
    without,
)


def listed(ids, distances, complete=False, **fields) -> Entry:
    return Entry(KEYWORD, "SPG302", listed=True, ids=tuple(ids), distances=tuple(distances),
                 complete=complete, **fields)  # fmt: skip


@pytest.mark.parametrize(
    ("deleted", "ids", "distances"),
    [
        ({"b"}, ("a", "c"), (0.1, 0.3)),
        ({"a", "c"}, ("b",), (0.2,)),
        ({"zz"}, ("a", "b", "c"), (0.1, 0.2, 0.3)),
        (set(), ("a", "b", "c"), (0.1, 0.2, 0.3)),
    ],
)
def test_a_deleted_member_leaves_the_list_in_order(deleted, ids, distances):
    entry = listed("abc", (0.1, 0.2, 0.3))
    kept = without(entry, deleted)
    assert (kept.ids, kept.distances) == (ids, distances)
    assert not kept.complete


@pytest.mark.parametrize(
    ("complete", "remaining", "witness", "known"),
    [
        (False, ("b",), "b", True),  # another listed member holds the variant
        (True, (), None, True),  # every holder was listed, none is left: none holds it
        (False, (), None, False),  # unlisted holders may remain: unknown
    ],
)
def test_a_deleted_witness_is_replaced_from_the_list_or_becomes_unknown(
    complete, remaining, witness, known
):
    entry = listed(("a", *remaining), (0.1,) * (1 + len(remaining)), complete=complete,
                   witness="a", witness_known=True)  # fmt: skip
    kept = without(entry, {"a"})
    assert (kept.witness, kept.witness_known) == (witness, known)
    assert kept.corpus is (None if not known else witness is not None)


def test_a_deleted_abstract_witness_becomes_unknown():
    entry = listed(("a", "b"), (0.1, 0.2), abstract_witness="a", abstract_known=True)
    kept = without(entry, {"a"})
    assert (kept.abstract_witness, kept.abstract_known, kept.abstract) == (None, False, None)


@pytest.mark.parametrize(
    ("candidate", "ids"),
    [
        (Candidate("x", 0.05, False), ("x", "a", "b")),  # before the first
        (Candidate("x", 0.25, False), ("a", "b", "x")),  # before the last
        (Candidate("x", 0.35, False), ("a", "b", "c")),  # after the last: stays out
        (Candidate("b0", 0.2, False), ("a", "b", "b0")),  # a tie: ids as bytes
        (Candidate("B", 0.2, False), ("a", "B", "b")),  # "B" < "b" in C order
    ],
)
def test_a_candidate_enters_an_incomplete_list_only_before_its_last_member(candidate, ids):
    kept = with_candidates(listed("abc", (0.1, 0.2, 0.3)), [candidate], cap=3)
    assert kept.ids == ids
    assert list(kept.distances) == sorted(kept.distances)


@pytest.mark.parametrize(
    "ids",
    [
        ("b", "a", "B", "ab", "a b", "a-b", "a_b"),
        ("é", "e", "z", "ÿ", "Ā", "中", "\U0001f600", "\uffff", "\x7f"),  # multi-byte UTF-8
        ("PMID:1", "PMID:10", "PMID:1:0", "PMID:1/0", "PMID:2"),
    ],
)
def test_ids_sort_as_their_utf8_bytes_like_collate_c(ids):
    pairs = [(0.5, i) for i in ids]
    assert sorted(pairs, key=order_key) == sorted(pairs, key=lambda p: (p[0], p[1].encode()))


@pytest.mark.parametrize(("cap", "ids", "complete"), [(5, ("a", "x", "b", "y"), True),
                                                      (3, ("a", "x", "b"), False)])  # fmt: skip
def test_every_candidate_enters_a_complete_list_up_to_the_cap(cap, ids, complete):
    entry = listed("ab", (0.1, 0.3), complete=True)
    new = [Candidate("x", 0.2, False), Candidate("y", 0.9, False)]
    kept = with_candidates(entry, new, cap=cap)
    assert (kept.ids, kept.complete) == (ids, complete)


def test_a_rewritten_member_moves_to_its_new_distance():
    entry = listed("abc", (0.1, 0.2, 0.3))
    kept = with_candidates(without(entry, {"a"}), [Candidate("a", 0.25, True)], cap=40)
    assert kept.ids == ("b", "a", "c")  # c is still the exact third: the list keeps it


def test_an_incomplete_list_emptied_by_deletes_takes_nobody():
    emptied = without(listed("ab", (0.1, 0.2)), {"a", "b"})
    kept = with_candidates(emptied, [Candidate("x", 0.01, False)], cap=40)
    assert kept.ids == () and not kept.answers(1)


def test_an_incomplete_list_grows_with_candidates_before_its_last_member_up_to_the_cap():
    entry = listed("ab", (0.1, 0.5))
    new = [Candidate(f"n{i}", 0.2 + i / 100, False) for i in range(5)]
    assert len(with_candidates(entry, new, cap=40).ids) == 7
    assert with_candidates(entry, new, cap=4).ids == ("a", "n0", "n1", "n2")


@pytest.mark.parametrize(
    ("witness", "abstract", "new", "expected"),
    [
        (None, None, [Candidate("m", None, False)], ("m", None)),
        (None, None, [Candidate("m", None, True), Candidate("k", None, True)], ("k", "k")),
        ("a", None, [Candidate("m", None, True)], ("a", "m")),
        ("a", "b", [Candidate("m", None, True)], ("a", "b")),
    ],
)
def test_a_new_holder_grounds_a_variant(witness, abstract, new, expected):
    entry = Entry(KEYWORD, "SOD1", witness=witness, witness_known=True,
                  abstract_witness=abstract, abstract_known=True)  # fmt: skip
    kept = with_candidates(entry, new, cap=40)
    assert (kept.witness, kept.abstract_witness) == expected
    assert kept.corpus is True and kept.grounded


@pytest.mark.parametrize(
    ("new", "deleted", "first"),
    [
        ([Candidate("m", None, True)], set(), "f"),  # a new row is numbered after every row
        ([Candidate("m", 0.1, False, carried=True)], {"m"}, "f"),  # not an abstract
        ([Candidate("m", None, True, carried=True)], {"m"}, None),  # takes its old place back
        ([], {"f"}, None),  # the first holder deleted
        ([Candidate("f", None, True, carried=True)], {"f"}, None),  # rewritten in place
        ([], {"x"}, "f"),
    ],
)
def test_the_first_abstract_holder_stays_known_until_a_write_may_move_it(new, deleted, first):
    entry = Entry(KEYWORD, "SOD1", witness="w", witness_known=True, abstract_witness="f",
                  abstract_known=True, abstract_first="f")  # fmt: skip
    kept = with_candidates(without(entry, deleted), new, cap=40)
    assert kept.abstract_first == first


def test_an_entity_entry_takes_no_witness():
    entry = Entry(ENTITY, "SOD1", listed=True, ids=("a",), distances=(0.5,))
    kept = with_candidates(entry, [Candidate("m", 0.1, True)], cap=40)
    assert kept.ids == ("m", "a") and kept.witness is None


def test_a_complete_entry_refuses_a_candidate_without_a_distance():
    entry = listed("a", (0.1,), complete=True)
    with pytest.raises(ValueError, match="no distance"):
        with_candidates(entry, [Candidate("m", None, False)], cap=40)


def test_a_candidate_without_a_distance_stays_out_of_the_list_but_may_witness():
    entry = listed("a", (0.1,))
    kept = with_candidates(entry, [Candidate("m", None, True)], cap=40)
    assert kept.ids == ("a",) and (kept.witness, kept.abstract_witness) == ("m", "m")


@pytest.mark.parametrize("bad", [{"kind": "other"}, {"ids": ("a",)}])
def test_an_entry_refuses_an_unknown_kind_or_ids_without_distances(bad):
    with pytest.raises(ValueError):
        Entry(**{"kind": KEYWORD, "text": "x", **bad})


@pytest.mark.parametrize(
    ("rows", "depth", "threshold"),
    [(0, 40, 40), (10, 40, 40), (62_196, 40, 1578), (1_000_000, 40, 6325), (250_000, 18, 2122)],
)
def test_the_walk_threshold_grows_with_the_square_root_of_the_table(rows, depth, threshold):
    assert walk_threshold(rows, depth) == threshold
