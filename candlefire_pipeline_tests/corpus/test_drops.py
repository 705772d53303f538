"""Batch keys, drop routing and the chunks stage."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus.chunking import chunk_paper
from candlefire_pipeline.corpus.drops import (
    SUPPORTED_SUFFIXES,
    is_supported_drop,
    validate_batch_key,
    write_chunks,
    write_papers,
)
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, PAPER_SCHEMA
from candlefire_pipeline_tests.corpus.bad_inputs import line, rec


@pytest.mark.parametrize(
    "key", ["2024-06-01.jsonl", "pubmed25n1274.xml.gz", "a", "x" * 200, "batch v2.jsonl"]
)
def test_valid_batch_keys_pass_through(key):
    assert validate_batch_key(key) == key


@pytest.mark.parametrize(
    "key, message",
    [
        ("", "1..200"),
        ("x" * 201, "1..200"),
        ("a/b.jsonl", "not a path"),
        ("a\\b.jsonl", "not a path"),
        ("..", "'..'"),
        ("a..b.jsonl", "'..'"),
        (".hidden.jsonl", "dot"),
        ("a\nb.jsonl", "control"),
        ("a\x00b", "control"),
    ],
)
def test_unsafe_batch_keys_raise_value_error(key, message):
    with pytest.raises(ValueError, match=message):
        validate_batch_key(key)


@pytest.mark.parametrize(
    "name, supported",
    [("a.jsonl", True), ("a.jsonl.gz", True), ("a.xml", True), ("a.xml.gz", True),
     ("a.json", False), ("a.xml.zip", False), ("a.jsonl.part", False)],
)  # fmt: skip
def test_supported_suffixes(name, supported):
    assert is_supported_drop(name) is supported
    assert name.endswith(SUPPORTED_SUFFIXES) is supported


def test_papers_parquet_has_the_schema_and_hashes(tmp_path):
    drop = tmp_path / "b.jsonl"
    drop.write_bytes(line(rec("1")) + line(rec("2", full_text="[Results]\nIt worked.")))
    write_papers(drop, tmp_path / "out")
    table = pq.read_table(tmp_path / "out/papers.parquet")
    assert table.schema.equals(PAPER_SCHEMA)
    rows = table.to_pylist()
    assert [r["record_no"] for r in rows] == [1, 2]
    assert rows[0]["paper_hash"] != rows[1]["paper_hash"]
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_write_chunks_matches_chunk_paper_and_counts_sections(tmp_path):
    full = "pre\n[Introduction]\ni\n[Methods]\nm\n[Empty]\n\n[Results]\nr"
    drop = tmp_path / "b.jsonl"
    drop.write_bytes(line(rec("1")) + line(rec("2", full_text=full)) + line(rec("3")))
    write_papers(drop, tmp_path)
    summary = write_chunks(tmp_path)
    table = pq.read_table(tmp_path / "chunks.parquet")
    assert table.schema.equals(CHUNK_SCHEMA)
    papers = pq.read_table(tmp_path / "papers.parquet").to_pylist()
    assert table.to_pylist() == [c for p in papers for c in chunk_paper(p)]
    assert table.column("chunk_id").to_pylist() == ["1", "2_s0", "2_s1", "2_s2", "2_s3", "3"]
    assert (summary.papers, summary.chunks, summary.full_text_papers) == (3, 6, 1)
    assert summary.sections == {
        "abstract": 2,
        "Abstract": 1,
        "Introduction": 1,
        "Methods": 1,
        "Results": 1,
    }


def test_write_chunks_without_papers_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="papers.parquet"):
        write_chunks(tmp_path)
    assert not list(tmp_path.iterdir())
