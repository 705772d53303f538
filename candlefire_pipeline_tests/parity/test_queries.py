"""The committed query set and the loader's handling of extra and bad query files."""

from __future__ import annotations

import re

import pytest

from candlefire_pipeline.parity.queries import (
    DEFAULT_QUERIES,
    ParityQuery,
    QueryFileError,
    load_queries,
)


def test_committed_set_has_at_least_50_distinct_queries_of_every_kind():
    queries = load_queries()
    assert DEFAULT_QUERIES.is_file() and len(queries) >= 50
    assert len({q.id for q in queries}) == len(queries)
    terms = [t for q in queries for t in q.terms]
    assert any(len(t) < 3 for t in terms)  # under Chroma's trigram floor
    assert {"SPG302", "SPG 302", "SPG-302"} <= set(terms)  # spacing / hyphen variants
    assert {"Edaravone", "sod1"} <= set(terms)  # another case than the corpus
    assert {"rotarod", "Hb9-GFP"} <= set(terms)  # only in body chunks
    assert "nusinersen" in terms  # absent from the corpus
    assert any(not q.terms and not q.entities for q in queries)  # purely semantic
    assert any(len(q.entities) > 12 for q in queries)  # over the entity cap
    assert {"Q331K", "G93A", "G 93A"} <= set(terms)  # mutation names (letter -> digit variants)


def test_extra_file_ids_default_to_file_and_line(tmp_path):
    extra = tmp_path / "mine.jsonl"
    extra.write_text(
        '{"text": "SPG302 in mice", "terms": ["SPG302"]}\n'
        "\n"
        '{"id": "named", "text": "tofersen", "entities": ["tofersen"]}\n'
    )
    assert load_queries(extra) == [
        ParityQuery("mine:1", "SPG302 in mice", (), ("SPG302",)),
        ParityQuery("named", "tofersen", ("tofersen",), None),  # terms from the text
    ]


@pytest.mark.parametrize(
    ("line", "keyword_terms"),
    [
        # no "terms": the app's rule takes the text's identifier tokens after the entities
        ('{"text": "Does SPG302 help SOD1-G93A mice with ALS?", "entities": ["tofersen"]}',
         ("tofersen", "SPG302", "SOD1", "G93A", "ALS")),
        # given terms replace the tokens; duplicates of entity names are dropped
        ('{"text": "SPG 302 in mice", "entities": ["SPG302"], "terms": ["SPG 302", "SPG302"]}',
         ("SPG302", "SPG 302")),
        ('{"text": "SPG302 in mice", "terms": []}', ()),
    ],
)  # fmt: skip
def test_keyword_terms_follow_the_apps_rule(tmp_path, line, keyword_terms):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    assert load_queries(path)[0].keyword_terms == keyword_terms


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"text": "ok"', "invalid JSON"),
        ('["text"]', "expected a JSON object"),
        ('{"terms": ["x"]}', "'text' must be a non-empty string"),
        ('{"text": "  "}', "'text' must be a non-empty string"),
        ('{"text": "x", "terms": "SPG302"}', "'terms' must be a list"),
        ('{"text": "x", "entities": [""]}', "'entities' must be a list of non-empty"),
        ('{"text": "x", "term": ["SPG302"]}', "unknown keys ['term']"),
        ('{"id": 7, "text": "x"}', "'id' must be a non-empty string"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "fine", "text": "first"}\n' + line + "\n")
    with pytest.raises(QueryFileError, match=rf"bad\.jsonl: line 2: .*{re.escape(message)}"):
        load_queries(path)


def test_duplicate_ids_and_empty_files_are_errors(tmp_path):
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(QueryFileError, match="line 2: duplicate id 'a' \\(first on line 1\\)"):
        load_queries(dup)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(QueryFileError, match="no queries"):
        load_queries(empty)
