"""Chroma `where` and `where_document` filters, checked and parsed into a small tree.

The rules are chromadb 1.5.9's (its Python validation and, measured, what its Rust core then
refuses), so a filter Chroma refuses is refused here too, with a ValueError naming the problem.
Operators Chroma has but this collection does not serve (`$contains` / `$not_contains` on a
metadata field, `$regex` / `$not_regex` on the document) raise UnsupportedCallError, never a
silently different answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Field operators served, and the ones comparing numbers only.
FIELD_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
ORDERING = ("$gt", "$gte", "$lt", "$lte")
LISTS = ("$in", "$nin")
LOGICAL = ("$and", "$or")
DOCUMENT_OPERATORS = ("$contains", "$not_contains")
#: Chroma operators outside the served subset: refused by name.
UNSERVED_FIELD = ("$contains", "$not_contains")
UNSERVED_DOCUMENT = ("$regex", "$not_regex")


class UnsupportedCallError(ValueError):
    """A Chroma call, argument or operator this collection does not serve."""


@dataclass(frozen=True)
class Field:
    """`{key: {op: value}}`; `values` holds one value, or the list of $in / $nin."""

    key: str
    op: str
    values: tuple


@dataclass(frozen=True)
class Contains:
    """`{"$contains": text}`, or `$not_contains` when negated."""

    text: str
    negated: bool = False


@dataclass(frozen=True)
class Logical:
    """`$and` / `$or` over two or more filters."""

    op: str
    parts: tuple


def _kind(value: Any) -> type | None:
    """The metadata type a value has (bool is not an int here, as in Chroma)."""
    if isinstance(value, bool):
        return bool
    if isinstance(value, int | float | str):
        return type(value)
    return None


def _check_scalar(value: Any, op: str, key: str) -> None:
    if _kind(value) is None:
        raise ValueError(
            f"where: {key!r} {op} needs a str, int, float or bool operand, got {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"where: {key!r} {op} cannot compare with {value!r}")


def _field(key: str, op: str, operand: Any) -> Field:
    if op in UNSERVED_FIELD:
        raise UnsupportedCallError(
            f"where: {op} on a metadata field ({key!r}) is not served (metadata holds no lists)"
        )
    if op not in FIELD_OPERATORS:
        raise UnsupportedCallError(
            f"where: unknown operator {op!r} on {key!r}; served: {', '.join(FIELD_OPERATORS)}"
        )
    if op in LISTS:
        if not isinstance(operand, list) or not operand:
            raise ValueError(f"where: {key!r} {op} needs a non-empty list, got {operand!r}")
        for value in operand:
            _check_scalar(value, op, key)
        if len({_kind(value) for value in operand}) != 1:
            raise ValueError(
                f"where: {key!r} {op} needs values of one type (int, float, str or bool), "
                f"got {operand!r}"
            )
        return Field(key, op, tuple(operand))
    _check_scalar(operand, op, key)
    if op in ORDERING and _kind(operand) not in (int, float):
        raise ValueError(f"where: {key!r} {op} compares numbers only, got {operand!r}")
    return Field(key, op, (operand,))


def _parts(op: str, value: Any, parse, what: str) -> Logical:
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError(f"{what}: {op} needs a list of at least two filters, got {value!r}")
    return Logical(op, tuple(parse(part) for part in value))


def parse_where(where: Any) -> Field | Logical:
    """The tree of a `where` filter (Chroma's rules), or a ValueError naming what is wrong."""
    if not isinstance(where, dict) or len(where) != 1:
        raise ValueError(f"where must be a dict with exactly one key, got {where!r}")
    ((key, value),) = where.items()
    if not isinstance(key, str):
        raise ValueError(f"where: a key must be a str, got {key!r}")
    if key in LOGICAL:
        return _parts(key, value, parse_where, "where")
    if key.startswith("$"):
        raise UnsupportedCallError(
            f"where: {key!r} is not a metadata field nor one of {', '.join(LOGICAL)}"
        )
    if isinstance(value, dict):
        if len(value) != 1:
            raise ValueError(f"where: {key!r} needs exactly one operator, got {value!r}")
        ((op, operand),) = value.items()
        return _field(key, op, operand)
    _check_scalar(value, "$eq", key)
    return Field(key, "$eq", (value,))


def parse_where_document(where_document: Any) -> Contains | Logical:
    """The tree of a `where_document` filter (exact, case-sensitive substrings)."""
    if not isinstance(where_document, dict) or len(where_document) != 1:
        raise ValueError(
            f"where_document must be a dict with exactly one operator, got {where_document!r}"
        )
    ((op, operand),) = where_document.items()
    if op in LOGICAL:
        return _parts(op, operand, parse_where_document, "where_document")
    if op in UNSERVED_DOCUMENT:
        raise UnsupportedCallError(f"where_document: {op} is not served (only exact substrings)")
    if op not in DOCUMENT_OPERATORS:
        raise UnsupportedCallError(
            f"where_document: unknown operator {op!r}; served: "
            f"{', '.join(DOCUMENT_OPERATORS + LOGICAL)}"
        )
    if not isinstance(operand, str) or not operand:
        raise ValueError(f"where_document: {op} needs a non-empty str, got {operand!r}")
    return Contains(operand, negated=op == "$not_contains")
