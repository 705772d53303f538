"""Drops apply in file-name order: a new drop that sorts before one already applied is named."""

from __future__ import annotations

import pytest

from candlefire_pipeline.corpus.drop_order import order_warning, sorting_before


@pytest.mark.parametrize(
    ("new", "applied", "expected"),
    [
        ([], ["v2.jsonl"], {}),
        (["v3.jsonl"], [], {}),
        (["v3.jsonl"], ["v1.jsonl", "v2.jsonl"], {}),
        (["after-backup.jsonl"], ["v2.jsonl"], {"after-backup.jsonl": ["v2.jsonl"]}),
        (["0002.jsonl", "0009.jsonl"], ["0001.jsonl", "0003.jsonl", "0005.jsonl"],
         {"0002.jsonl": ["0003.jsonl", "0005.jsonl"]}),
        (["b.xml"], ["b.xml"], {}),  # itself (applied again) holds nothing back
    ],
)  # fmt: skip
def test_new_drops_sorting_before_applied_ones_are_found(new, applied, expected):
    assert sorting_before(new, applied) == expected


def test_the_warning_names_the_drops_and_the_way_out():
    line = order_warning("a.jsonl", ["b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"])
    assert "a.jsonl sorts before b.jsonl, c.jsonl, d.jsonl and 1 more" in line
    assert "file-name order" in line and "sorts last" in line
