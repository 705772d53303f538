"""The parsers on the real shared corpora, checked against counts read independently (regex)."""

from __future__ import annotations

import gzip
import json
import re

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.corpus.medline import read_medline
from candlefire_pipeline.corpus.records import Accepted, Deleted, Rejected


def xml_text(path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return data.decode("utf-8")


def outcomes(path) -> list:
    return list(read_medline(path).outcomes)


def test_medline_2016_file_counts_and_delete_citations(shared_data):
    path = shared_data / "medline/medline16n0902.xml.gz"
    text = xml_text(path)
    citations = len(re.findall(r"<MedlineCitation[ >]", text))
    delete_blocks = re.findall(r"<DeleteCitation>(.*?)</DeleteCitation>", text, re.S)
    deleted = {p for block in delete_blocks for p in re.findall(r"<PMID[^>]*>(\d+)</PMID>", block)}
    assert citations > 500 and deleted  # the file really has both
    found = outcomes(path)
    assert sum(isinstance(o, Accepted) for o in found) == citations
    assert not [o for o in found if isinstance(o, Rejected)]
    assert {o.pmid for o in found if isinstance(o, Deleted)} == deleted


def test_medline_2016_fields_of_first_citation(shared_data):
    path = shared_data / "medline/medline16n0902.xml.gz"
    first = next(o for o in outcomes(path) if isinstance(o, Accepted)).paper
    head = xml_text(path).split("</MedlineCitation>", 1)[0]
    pmid = re.search(r"<PMID[^>]*>(\d+)</PMID>", head).group(1)
    labels = re.findall(r'<AbstractText Label="([A-Z]+)"', head)
    descriptors = re.findall(r"<DescriptorName[^>]*>([^<]+)</DescriptorName>", head)
    last_names = re.findall(r"<LastName>([^<]+)</LastName>", head)
    assert first["pmid"] == pmid
    assert [line.split(":", 1)[0] for line in first["abstract"].split("\n")] == labels
    assert first["mesh_terms"] == descriptors
    assert [a.rsplit(" ", 1)[-1] for a in first["authors"]] == last_names
    assert first["year"] == int(re.search(r"<PubDate>\s*<Year>(\d{4})", head).group(1))
    assert first["title"].startswith("Neuroplasticity in the processing of pitch")


def test_medline_date_gives_the_first_four_digit_year(shared_data):
    path = shared_data / "medline/medline16n0902.xml.gz"
    expected = {}
    for block in xml_text(path).split("</MedlineCitation>"):
        date = re.search(r"<MedlineDate>(.*?)</MedlineDate>", block)
        if date:
            pmid = re.search(r"<PMID[^>]*>(\d+)</PMID>", block).group(1)
            expected[pmid] = int(re.search(r"\d{4}", date.group(1)).group(0))
    papers = {o.paper["pmid"]: o.paper for o in outcomes(path) if isinstance(o, Accepted)}
    assert expected
    assert {pmid: papers[pmid]["year"] for pmid in expected} == expected


@pytest.mark.parametrize(
    "name", ["medline/test_current_medline.xml.gz", "medline/pubmed-29768149.xml"]
)
def test_current_pubmed_files_dois_and_counts(shared_data, name):
    text = xml_text(shared_data / name)
    expected = {}
    for article in re.findall(r"<PubmedArticle>.*?</PubmedArticle>", text, re.S):
        own = re.sub(r"<ReferenceList>.*?</ReferenceList>", "", article, flags=re.S)
        pmid = re.search(r"<PMID[^>]*>(\d+)</PMID>", own).group(1)
        doi = re.search(r'<(?:ELocationID EIdType|ArticleId IdType)="doi"[^>]*>([^<]+)<', own)
        expected[pmid] = doi.group(1) if doi else ""
    found = outcomes(shared_data / name)
    assert {o.paper["pmid"]: o.paper["doi"] for o in found} == expected
    assert all(o.paper["title"] and o.paper["year"] for o in found)


@pytest.mark.parametrize("name", ["pubmedqa/papers.jsonl", "scifact/corpus.jsonl"])
def test_real_jsonl_batches_are_accepted_whole(shared_data, tmp_path, name):
    path = shared_data / name
    lines = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    summary = write_papers(path, tmp_path)
    assert (summary.records_in, summary.accepted, summary.rejected) == (len(lines), len(lines), 0)
    table = pq.read_table(tmp_path / "papers.parquet")
    assert table.column("pmid").to_pylist() == [str(d["pmid"]) for d in lines]
    assert table.column("mesh_terms").to_pylist() == [d["mesh_terms"] for d in lines]
    assert table.column("year").to_pylist() == [d["year"] or None for d in lines]
    chunks = write_chunks(tmp_path)
    # abstract-only corpora: exactly one chunk per paper, id = bare pmid
    assert (chunks.papers, chunks.chunks, chunks.full_text_papers) == (len(lines), len(lines), 0)
    ids = pq.read_table(tmp_path / "chunks.parquet").column("chunk_id").to_pylist()
    assert ids == [str(d["pmid"]) for d in lines]


def test_medline_batch_writes_deleted_parquet(shared_data, tmp_path):
    summary = write_papers(shared_data / "medline/medline16n0902.xml.gz", tmp_path)
    assert summary.deleted == 1 and summary.rejected == 0
    assert pq.read_table(tmp_path / "deleted.parquet").column("pmid").to_pylist() == ["26432306"]
    assert summary.reasons_markdown() == "No rejected records."
