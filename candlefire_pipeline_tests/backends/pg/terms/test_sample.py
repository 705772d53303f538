"""The document sample that routes a keyword variant: counts as LIKE / ILIKE would, taken
again as the table changes, never routing on noise."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.terms import sample
from candlefire_pipeline.backends.pg.terms.sample import DocumentSample, _holders

DOCUMENTS = ["SOD1 and sod1", "TDP-43 in motor neurons", "motor units", "no match"]


@pytest.mark.parametrize(
    ("mode", "variants", "expected"),
    [
        ("like", ["SOD1", "sod1", "motor", "absent"], [1, 1, 2, 0]),
        ("ilike", ["SOD1", "Motor", ""], [1, 2, 0]),
        ("like", ["motor", "motor"], [2, 2]),  # the same text twice: counted for both
    ],
)
def test_holders_are_documents_holding_each_variant(mode, variants, expected):
    assert _holders(DOCUMENTS, variants, mode) == expected


class Taken:
    def __init__(self, documents):
        self.calls, self.documents = 0, documents

    def __call__(self, conn, names, rows):
        self.calls += 1
        return self.documents


def test_frequent_needs_the_estimate_past_the_threshold_and_enough_sightings(monkeypatch):
    monkeypatch.setattr(sample, "_sample", Taken(["motor"] * 10 + ["x"] * 990))
    frequent = DocumentSample().frequent(None, None, "like", ["motor", "x"], 100_000, 500)
    assert frequent == [True, True]  # 1,000 and 99,000 holders estimated
    monkeypatch.setattr(sample, "_sample", Taken(["motor"] * 2 + ["x"] * 998))
    frequent = DocumentSample().frequent(None, None, "like", ["motor"], 10**9, 500)
    assert frequent == [False]  # two sightings are noise, however large the table


def test_the_sample_is_taken_again_when_the_table_changes(monkeypatch):
    taken = Taken(["motor"])
    monkeypatch.setattr(sample, "_sample", taken)
    documents = DocumentSample()
    for rows in (1000, 1050, 1200, 1200):
        documents.frequent(None, None, "like", ["motor"], rows, 10)
    assert taken.calls == 2  # 1050 is within the drift, 1200 is not


def test_an_empty_table_routes_nothing(monkeypatch):
    monkeypatch.setattr(sample, "_sample", Taken([]))
    assert DocumentSample().frequent(None, None, "like", ["a", "b"], 0, 1) == [False, False]
