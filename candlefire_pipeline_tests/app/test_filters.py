"""Chroma's filter rules, pure: what parses into what, what Chroma refuses (a ValueError naming
the problem), what is not served (UnsupportedCallError naming the operator), and how a metadata
comparison is typed on pgvector."""

from __future__ import annotations

import pyarrow as pa
import pytest

from candlefire_pipeline.app.filters import (
    Contains,
    Field,
    Logical,
    UnsupportedCallError,
    parse_where,
    parse_where_document,
)
from candlefire_pipeline.app.pg_sql import FALSE, KINDS, NULLABLE, TRUE, _as_int, field_sql
from candlefire_pipeline.backends.chroma.metadata import META_KEYS
from candlefire_pipeline.corpus.schema import store_schema


@pytest.mark.parametrize(
    ("where", "tree"),
    [
        ({"year": 2000}, Field("year", "$eq", (2000,))),
        ({"has_full_text": True}, Field("has_full_text", "$eq", (True,))),
        ({"pmid": {"$ne": "1"}}, Field("pmid", "$ne", ("1",))),
        ({"year": {"$gte": 1999.5}}, Field("year", "$gte", (1999.5,))),
        ({"pmid": {"$in": ["1", "2"]}}, Field("pmid", "$in", ("1", "2"))),
        ({"$or": [{"a": 1}, {"$and": [{"b": "x"}, {"c": {"$nin": [True]}}]}]},
         Logical("$or", (Field("a", "$eq", (1,)), Logical("$and", (
             Field("b", "$eq", ("x",)), Field("c", "$nin", (True,))))))),
    ],
)  # fmt: skip
def test_a_where_filter_parses_into_its_tree(where, tree):
    assert parse_where(where) == tree


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({}, "exactly one key"),
        ([], "exactly one key"),
        ({"a": 1, "b": 2}, "exactly one key"),
        ({1: 2}, "must be a str"),
        ({"$and": [{"a": 1}]}, "at least two"),
        ({"$or": {"a": 1}}, "at least two"),
        ({"a": {}}, "exactly one operator"),
        ({"a": {"$gt": 1, "$lt": 2}}, "exactly one operator"),
        ({"a": {"$gt": "1"}}, "compares numbers only"),
        ({"a": {"$lt": True}}, "compares numbers only"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": {"$in": "1"}}, "non-empty list"),
        ({"a": {"$in": [1, "1"]}}, "one type"),
        ({"a": {"$in": [1, 1.5]}}, "one type"),
        ({"a": {"$in": [1, True]}}, "one type"),
        ({"a": {"$eq": [1]}}, "str, int, float or bool"),
        ({"a": None}, "str, int, float or bool"),
        ({"a": [1]}, "str, int, float or bool"),
        ({"a": float("inf")}, "cannot compare"),
        ({"a": {"$ne": float("nan")}}, "cannot compare"),
    ],
)
def test_a_filter_chroma_refuses_is_refused_naming_why(where, named):
    with pytest.raises(ValueError, match=named):
        parse_where(where)


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({"a": {"$contains": "x"}}, r"\$contains"),
        ({"a": {"$not_contains": "x"}}, r"\$not_contains"),
        ({"a": {"$regex": "x"}}, r"\$regex"),
        ({"$not": [{"a": 1}, {"b": 2}]}, r"\$not"),
        ({"$in": [1]}, r"\$in"),
    ],
)
def test_an_unserved_operator_is_named(where, named):
    with pytest.raises(UnsupportedCallError, match=named):
        parse_where(where)


@pytest.mark.parametrize(
    ("document", "tree"),
    [
        ({"$contains": "100%"}, Contains("100%")),
        ({"$not_contains": "a_b"}, Contains("a_b", negated=True)),
        ({"$and": [{"$contains": "x"}, {"$or": [{"$contains": "y"}, {"$not_contains": "z"}]}]},
         Logical("$and", (Contains("x"), Logical("$or", (Contains("y"),
                                                          Contains("z", True)))))),
    ],
)  # fmt: skip
def test_a_document_filter_parses_into_its_tree(document, tree):
    assert parse_where_document(document) == tree


@pytest.mark.parametrize(
    ("document", "error", "named"),
    [
        ({}, ValueError, "exactly one operator"),
        ({"$contains": ""}, ValueError, "non-empty str"),
        ({"$contains": 3}, ValueError, "non-empty str"),
        ({"$and": [{"$contains": "x"}]}, ValueError, "at least two"),
        ({"$regex": "x+"}, UnsupportedCallError, r"\$regex"),
        ({"$not_regex": "x+"}, UnsupportedCallError, r"\$not_regex"),
        ({"$CONTAINS": "x"}, UnsupportedCallError, r"\$CONTAINS"),
    ],
)
def test_a_document_filter_is_refused_naming_why(document, error, named):
    with pytest.raises(error, match=named):
        parse_where_document(document)


def test_the_typed_columns_are_the_chroma_stores_metadata_keys():
    """Every key the Chroma store writes has the kind its column holds (a new key fails here)."""
    assert set(KINDS) == set(META_KEYS)
    schema = store_schema(4)
    expected = {pa.int32(): int, pa.bool_(): bool, pa.string(): str}
    assert {key: expected[schema.field(key).type] for key in META_KEYS} == KINDS
    assert NULLABLE == {key for key in META_KEYS if key == "year"}


@pytest.mark.parametrize(
    ("value", "as_int"),
    [(1.9, 1), (-0.5, 0), (-1.5, -1), (2000.0, 2000), (1e30, 2**63 - 1), (-1e30, -(2**63)),
     (7, 7)],
)  # fmt: skip
def test_a_float_on_an_int_field_is_cast_as_chromas_core_casts_it(value, as_int):
    assert _as_int(value) == as_int


@pytest.mark.parametrize(
    ("field", "constant"),
    [
        (Field("nokey", "$eq", (1,)), FALSE),
        (Field("nokey", "$ne", (1,)), TRUE),
        (Field("nokey", "$nin", ("a",)), TRUE),
        (Field("year", "$eq", ("2000",)), FALSE),
        (Field("year", "$ne", (True,)), TRUE),
        (Field("has_full_text", "$eq", (1,)), FALSE),
        (Field("has_full_text", "$gt", (0,)), FALSE),
        (Field("pmid", "$lt", (5,)), FALSE),
        (Field("pmid", "$in", (1, 2)), FALSE),
    ],
)
def test_a_value_of_another_kind_or_a_missing_key_is_a_constant(field, constant):
    condition, params = field_sql(field)
    assert condition is constant and params == []
