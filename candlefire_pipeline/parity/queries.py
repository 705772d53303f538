"""The parity query set: the committed queries.jsonl plus any extra JSONL files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.retrieval.query_plan import QueryPlan

#: The committed query set over the demo corpus (see corpus/demo.py).
DEFAULT_QUERIES = Path(__file__).with_name("queries.jsonl")
_ALLOWED_KEYS = {"id", "text", "entities", "terms", "note"}


@dataclass(frozen=True)
class ParityQuery:
    """One query as the app would issue it: free text, entity names and, optionally, the terms
    that replace the identifier tokens of the text (None: the app's rule takes them)."""

    id: str
    text: str
    entities: tuple[str, ...] = ()
    terms: tuple[str, ...] | None = None

    @property
    def keyword_terms(self) -> tuple[str, ...]:
        """The non-blank terms retrieve() searches and grounds: entities, then terms/tokens."""
        plan = QueryPlan.build(self.text, self.entities, self.terms)
        return tuple(t for t in plan.keyword_terms if t.strip())


class QueryFileError(ValueError):
    """A query file line that cannot be used; the message names the file and line."""


def _string_list(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{key!r} must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _parse_line(raw_line: str, default_id: str) -> ParityQuery:
    try:
        raw = json.loads(raw_line)
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON ({err.msg} at column {err.colno})") from err
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    unknown = set(raw) - _ALLOWED_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} (allowed: {sorted(_ALLOWED_KEYS)})")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'text' must be a non-empty string")
    query_id = raw.get("id", default_id)
    if not isinstance(query_id, str) or not query_id.strip():
        raise ValueError("'id' must be a non-empty string when given")
    return ParityQuery(
        id=query_id.strip(),
        text=text.strip(),
        entities=_string_list(raw.get("entities") or [], "entities"),
        terms=None if raw.get("terms") is None else _string_list(raw["terms"], "terms"),
    )


def load_queries(path: Path | str | None = None) -> list[ParityQuery]:
    """Queries of one JSONL file (default: the committed set); a bad line raises QueryFileError.

    Each line is {"text", "entities"?, "terms"?, "id"?, "note"?}; a missing id becomes
    "<file stem>:<line>". Blank lines are skipped; ids must be unique within the file.
    """
    path = Path(path) if path is not None else DEFAULT_QUERIES
    queries: list[ParityQuery] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as lines:
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                query = _parse_line(line, default_id=f"{path.stem}:{line_no}")
            except ValueError as err:
                raise QueryFileError(f"{path}: line {line_no}: {err}") from err
            if query.id in seen:
                raise QueryFileError(
                    f"{path}: line {line_no}: duplicate id {query.id!r} (first on line "
                    f"{seen[query.id]})"
                )
            seen[query.id] = line_no
            queries.append(query)
    if not queries:
        raise QueryFileError(f"{path}: no queries")
    return queries
