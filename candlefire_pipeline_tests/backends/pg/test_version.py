"""The pgvector floor's arithmetic, and the fresh-size extrapolation of the bloat estimate."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.health import _extrapolate
from candlefire_pipeline.backends.pg.version import (
    FLOOR,
    ServerVersions,
    missing_fixes,
    parse_version,
)


@pytest.mark.parametrize(
    "text, parsed",
    [("0.8.2", (0, 8, 2)), ("0.8.6", (0, 8, 6)), ("0.10.0", (0, 10, 0)), ("0.9.0-beta", (0, 9, 0)),
     (" 18.6 ", (18, 6)), ("1", (1,))],
)  # fmt: skip
def test_parse_version(text, parsed):
    assert parse_version(text) == parsed


@pytest.mark.parametrize("text", ["", "beta", None, "v0.8.2"])
def test_parse_version_refuses_what_is_not_one(text):
    with pytest.raises(ValueError, match="not a version"):
        parse_version(text)


@pytest.mark.parametrize(
    "version, lacking",
    [("0.5.1", ["0.8.3", "0.8.4"]), ("0.8.2", ["0.8.3", "0.8.4"]), ("0.8.3", ["0.8.4"]),
     ("0.8.4", []), ("0.8.6", []), ("0.10.0", []), ("1.0.0", [])],
)  # fmt: skip
def test_missing_fixes_and_the_floor(version, lacking):
    assert [fix.split()[0] for fix in missing_fixes(version)] == lacking
    versions = ServerVersions("18.6", version)
    assert versions.below_floor() is bool(lacking)
    assert (versions.floor_problem() is None) is (not lacking)
    assert FLOOR == (0, 8, 4)


def test_no_extension_is_not_below_the_floor_but_says_so():
    versions = ServerVersions("16.2", None, None)
    assert not versions.below_floor() and versions.describe() == "Postgres 16.2, no pgvector"


@pytest.mark.parametrize(
    "rows, sizes, live, expected",
    [
        ((2500, 5000), [100, 200], 62_500, 2500),  # linear: a = 1
        ((2500, 5000), [100, 150], 62_500, round(150 * 12.5**0.585)),  # sublinear
        ((2500, 5000), [100, 100], 62_500, round(100 * 12.5**0.5)),  # a kept >= 0.5
        ((2500, 5000), [100, 250], 62_500, round(250 * 12.5**1.3219)),  # superlinear
        ((2500, 5000), [100, 400], 62_500, round(400 * 12.5**1.5)),  # a kept <= 1.5
        ((2500, 5000), [0, 300], 62_500, None),  # nothing measured
    ],
)
def test_extrapolate(rows, sizes, live, expected):
    got = _extrapolate(rows, sizes, live)
    assert got == pytest.approx(expected, rel=0.01) if expected else got is None
