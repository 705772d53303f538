"""Record validation rules, one raw record at a time."""

from __future__ import annotations

import pytest

from candlefire_pipeline.corpus.records import (
    CONTENT_FIELDS,
    RecordError,
    paper_hash,
    validate_record,
)


def raw(**over) -> dict:
    base = {
        "pmid": "35000001",
        "title": "TDP-43 aggregation in ALS",
        "abstract": "SOD1 and C9orf72 carriers were compared.",
        "authors": ["Ann Lee", "Bo Chen"],
        "year": 2022,
        "doi": "10.1000/tdp43",
        "mesh_terms": ["Amyotrophic Lateral Sclerosis"],
        "full_text": "[Methods]\nWe measured.",
        "citation_count": 3,
        "entity_names": ["TDP-43", "SOD1"],
    }
    return base | over


@pytest.mark.parametrize(
    "record, kind",
    [
        ([1, 2], "not_an_object"),
        ("a string", "not_an_object"),
        (raw(pmid=None), "missing_pmid"),
        ({k: v for k, v in raw().items() if k != "pmid"}, "missing_pmid"),
        (raw(pmid=""), "missing_pmid"),
        (raw(pmid="   "), "missing_pmid"),
        (raw(pmid="12_s3"), "bad_pmid"),  # "_" would make chunk ids ambiguous
        (raw(pmid="../../etc"), "bad_pmid"),
        (raw(pmid="1" * 33), "bad_pmid"),
        (raw(pmid=True), "wrong_type"),
        (raw(pmid=1.5), "wrong_type"),
        (raw(title=None, abstract=None), "no_text"),
        (raw(title=" ", abstract="\n"), "no_text"),
        (raw(title=12), "wrong_type"),
        (raw(year="2020a"), "wrong_type"),
        (raw(year="2020"), "wrong_type"),
        (raw(year=2020.0), "wrong_type"),
        (raw(year=True), "wrong_type"),
        (raw(year=1799), "out_of_range"),
        (raw(year=2101), "out_of_range"),
        (raw(year=-5), "out_of_range"),
        (raw(authors="Ann Lee"), "wrong_type"),
        (raw(authors=["Ann", 3]), "wrong_type"),
        (raw(mesh_terms="ALS"), "wrong_type"),
        (raw(entity_names={"a": 1}), "wrong_type"),
        (raw(citation_count=-1), "out_of_range"),
        (raw(citation_count=2**31), "out_of_range"),
        (raw(citation_count="5"), "wrong_type"),
        (raw(citation_count=2.0), "wrong_type"),
        (raw(citation_count=float("nan")), "wrong_type"),
        (raw(full_text=["[Methods]"]), "wrong_type"),
        (raw(doi=10), "wrong_type"),
        (raw(title="a\x00b"), "nul_byte"),
        (raw(full_text="x\x00"), "nul_byte"),
        (raw(mesh_terms=["ok", "b\x00d"]), "nul_byte"),
    ],
)
def test_invalid_records_are_rejected_with_a_specific_kind(record, kind):
    with pytest.raises(RecordError) as caught:
        validate_record(record)
    assert caught.value.kind == kind
    assert str(caught.value).startswith(f"{kind}: ")


@pytest.mark.parametrize(
    "over, field, expected",
    [
        ({"pmid": 35000001}, "pmid", "35000001"),  # numeric pmid in JSON
        ({"pmid": " 35000001 "}, "pmid", "35000001"),
        ({"pmid": "PMC12ab"}, "pmid", "PMC12ab"),
        ({"year": None}, "year", None),
        ({"year": 0}, "year", None),  # the source corpora's "unknown"
        ({"year": 1800}, "year", 1800),
        ({"year": 2100}, "year", 2100),
        ({"doi": None}, "doi", ""),
        ({"authors": None}, "authors", []),
        ({"full_text": ""}, "full_text", None),
        ({"full_text": None}, "full_text", None),
        ({"citation_count": None}, "citation_count", 0),
        ({"title": None}, "title", ""),  # abstract alone is enough
        ({"abstract": None}, "abstract", ""),  # title alone is enough
        ({"unknown_field": {"x": [1]}}, "pmid", "35000001"),  # extra fields ignored
    ],
)
def test_valid_records_are_normalized(over, field, expected):
    paper = validate_record(raw(**over))
    assert paper[field] == expected
    assert set(paper) == set(CONTENT_FIELDS)


def test_paper_hash_covers_content_not_record_position():
    paper = validate_record(raw())
    moved = paper | {"record_no": 99}
    assert paper_hash(moved) == paper_hash(paper | {"record_no": 1})
    assert paper_hash(paper | {"full_text": "[Results]\nnew"}) != paper_hash(paper)
    assert len(paper_hash(paper)) == 64
