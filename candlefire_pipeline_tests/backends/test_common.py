"""Pure helpers shared by every backend."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors


@pytest.mark.parametrize(
    ("variant", "pattern"),
    [
        ("SPG302", "%SPG302%"),
        ("50%", "%50\\%%"),
        ("x_y", "%x\\_y%"),
        ("a\\b", "%a\\\\b%"),
        ("'; DROP --", "%'; DROP --%"),
    ],
)
def test_like_pattern_escapes_metacharacters(variant, pattern):
    assert common.like_pattern(variant) == pattern


@pytest.mark.parametrize(
    ("mode", "variants", "document", "expected"),
    [
        ("like", ["SPG302"], "x SPG302 y", True),
        ("like", ["spg302"], "x SPG302 y", False),
        ("ilike", ["spg302"], "x SPG302 y", True),
        ("ilike", ["ωmega"], "ΩMEGA", True),
        ("ilike", ["i"], "\u0130", True),  # Postgres lower('İ') = 'i'
        ("like", ["a", "b"], "xbx", True),
    ],
)
def test_substring_matcher(mode, variants, document, expected):
    assert common.substring_matcher(variants, mode)(document) is expected


@pytest.mark.parametrize("bad", [[""], ["ok", ""], [None]])
def test_clean_variants_rejects_empty(bad):
    with pytest.raises(ValueError):
        common.clean_variants(bad)


def test_clean_variants_dedupes_and_rejects_bare_string():
    assert common.clean_variants(["a", "b", "a"]) == ["a", "b"]
    with pytest.raises(TypeError):
        common.clean_variants("abc")


def test_check_model_names_both_sides():
    common.check_model(None, "m", 4)
    common.check_model(("m", 4), "m", 4)
    with pytest.raises(DimensionMismatchError, match=r"'m' \(4-dim\).*'n' \(8-dim\)"):
        common.check_model(("m", 4), "n", 8)
    with pytest.raises(ValueError):
        common.check_model(None, "", 4)


def good_rows() -> pa.Table:
    return make_rows([chunk("1"), chunk("2", title=None, doi=None)], unit_vectors(2, 4))


def test_validate_rows_fills_optional_text():
    rows = common.validate_rows(good_rows())
    assert rows["title"].to_pylist() == ["Title of 1", ""]
    assert rows["doi"].null_count == 0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.drop_columns(["paper_hash"]), "lacks store_schema columns: paper_hash"),
        (lambda t: t.set_column(1, "pmid", pa.array(["1", None])), "'pmid' has 1 null"),
        (lambda t: t.set_column(1, "pmid", pa.array(["1", ""])), "'pmid' has empty"),
        (
            lambda t: t.set_column(
                16, "embedding", pa.array([[1.0] * 4, [2.0] * 4], pa.list_(pa.float32()))
            ),
            "fixed_size_list",
        ),
        (
            lambda t: t.set_column(
                16,
                "embedding",
                pa.FixedSizeListArray.from_arrays(
                    pa.array([np.nan, 0, 0, 1, 1, 0, 0, 0], pa.float32()), 4
                ),
            ),
            "NaN",
        ),
        (
            lambda t: t.set_column(
                16,
                "embedding",
                pa.FixedSizeListArray.from_arrays(pa.array([0.0] * 4 + [1.0] * 4, pa.float32()), 4),
            ),
            "zero vector",
        ),
    ],
)
def test_validate_rows_errors(mutate, message):
    with pytest.raises(ValueError, match=message):
        common.validate_rows(mutate(good_rows()))


def test_query_matrix_shapes_and_dim():
    assert common.query_matrix(np.ones(4), ("m", 4)).shape == (1, 4)
    with pytest.raises(DimensionMismatchError):
        common.query_matrix(np.ones((2, 3)), ("m", 4))
    with pytest.raises(ValueError):
        common.query_matrix(np.ones((1, 2, 3)), None)
