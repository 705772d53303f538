"""The demo drops: deterministic, parseable with the expected rejects, rich in edge cases."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus import demo
from candlefire_pipeline.corpus.demo import demo_pmid, write_demo_drops
from candlefire_pipeline.corpus.drops import write_chunks, write_papers


@pytest.fixture(scope="module")
def drops(tmp_path_factory) -> list[Path]:
    return write_demo_drops(tmp_path_factory.mktemp("drops"))


@pytest.fixture(scope="module")
def first_batch(drops, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("batch1")
    summary = write_papers(drops[0], out)
    chunks_summary = write_chunks(out)
    return {
        "summary": summary,
        "chunks_summary": chunks_summary,
        "papers": pq.read_table(out / "papers.parquet").to_pylist(),
        "rejects": pq.read_table(out / "rejects.parquet").to_pylist(),
        "chunks": pq.read_table(out / "chunks.parquet").to_pylist(),
    }


def test_same_bytes_every_time_and_names_sort_in_arrival_order(drops, tmp_path):
    again = write_demo_drops(tmp_path)
    assert [p.name for p in again] == [p.name for p in drops]
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in drops]
    assert [p.name for p in drops] == sorted(p.name for p in drops)
    assert [p.suffix for p in drops] == [".jsonl", ".jsonl", ".xml"]
    assert not list(tmp_path.glob("*.tmp"))


def test_first_drop_accepts_every_paper_and_rejects_the_three_bad_lines(first_batch):
    summary = first_batch["summary"]
    # FIRST_DROP_PAPERS good lines + truncated JSON + record without pmid + an early duplicate
    assert summary.records_in == demo.FIRST_DROP_PAPERS + 3
    assert summary.accepted == demo.FIRST_DROP_PAPERS
    assert summary.reasons == {"invalid_json": 1, "missing_pmid": 1, "duplicate_pmid": 1}
    duplicate = next(r for r in first_batch["rejects"] if r["reason"].startswith("duplicate"))
    assert duplicate["pmid"] == demo_pmid(demo.DUPLICATED_PAPER)
    assert duplicate["record_no"] == demo.DUPLICATED_PAPER  # the first record loses
    pmids = [p["pmid"] for p in first_batch["papers"]]
    assert sorted(pmids) == [demo_pmid(n) for n in range(1, demo.FIRST_DROP_PAPERS + 1)]
    resent = next(p for p in first_batch["papers"] if p["pmid"] == duplicate["pmid"])
    assert resent["doi"].endswith(".v2")


def test_update_and_medline_drops_parse_with_their_rejects_and_delete(drops, tmp_path):
    updates = write_papers(drops[1], tmp_path / "b2")
    # 3 changed papers + 1 gaining full text + NEW_IN_UPDATE new ones + 1 truncated line
    assert (updates.accepted, updates.rejected) == (4 + demo.NEW_IN_UPDATE, 1)
    assert updates.reasons == {"invalid_json": 1}
    papers = {p["pmid"]: p for p in pq.read_table(tmp_path / "b2/papers.parquet").to_pylist()}
    assert papers[demo_pmid(demo.GAINS_FULL_TEXT)]["full_text"]
    medline = write_papers(drops[2], tmp_path / "b3")
    assert (medline.accepted, medline.rejected, medline.deleted) == (demo.NEW_IN_MEDLINE, 0, 1)
    deleted = pq.read_table(tmp_path / "b3/deleted.parquet")["pmid"].to_pylist()
    assert deleted == [demo_pmid(demo.DELETED_PAPER)]


def test_full_text_and_abstract_only_papers_chunk_as_designed(first_batch):
    by_pmid: dict[str, list[dict]] = {}
    for chunk in first_batch["chunks"]:
        by_pmid.setdefault(chunk["pmid"], []).append(chunk)
    wide = by_pmid[demo_pmid(demo.WIDE_PAPER)]
    # 10 titled sections (one empty) + the abstract: capped at 6, priority sections only
    assert [c["section"] for c in wide] == [
        "Abstract", "Introduction", "Methods", "Results", "Discussion", "Conclusion",
    ]  # fmt: skip
    assert "Running title:" in wide[0]["document"]  # text before the first marker
    assert "[Note added in proof" in wide[2]["document"]  # a long bracket line is body text
    abstract_only = by_pmid[demo_pmid(demo.GAINS_FULL_TEXT)]
    assert [c["chunk_id"] for c in abstract_only] == [demo_pmid(demo.GAINS_FULL_TEXT)]
    full = sum(1 for chunks in by_pmid.values() if chunks[0]["has_full_text"])
    assert 0.3 < full / len(by_pmid) < 0.8  # both kinds well represented


def _texts(papers: list[dict]) -> str:
    return "\n".join(f"{p['title']}\n{p['abstract']}\n{p['full_text'] or ''}" for p in papers)


@pytest.mark.parametrize(
    "spelling",
    ["SPG302", "SPG 302", "SPG-302", "AMX0035", "AMX-0035", "ATH-1105", "ATH1105", "tofersen",
     "riluzole", "Riluzole", "TDP-43", "SOD1", "C9orf72", "FUS", "NF", "C9", "SOD1-G93A",
     "Q-331K"],
)  # fmt: skip
def test_spelling_variants_genes_and_short_tokens_are_present(first_batch, spelling):
    assert spelling in _texts(first_batch["papers"])


@pytest.mark.parametrize("spelling", ["Q331K", "Q 331K", "G 93A", "G-93A"])
def test_mutation_spellings_the_queries_must_reach_through_variants_are_absent(
    first_batch, spelling
):
    assert spelling not in _texts(first_batch["papers"])


@pytest.mark.parametrize("term", ["edaravone", "tofersen"])
def test_some_drugs_occur_in_one_case_only(first_batch, term):
    text = _texts(first_batch["papers"])
    assert term in text and term.capitalize() not in text and term.upper() not in text


@pytest.mark.parametrize("term", ["rotarod", "Hb9-GFP", "CMAP", "ChAT", "hanging-wire"])
def test_body_only_terms_never_reach_an_abstract_chunk(first_batch, term):
    body = [c for c in first_batch["chunks"] if c["chunk_index"] > 0 and term in c["document"]]
    abstract = [c for c in first_batch["chunks"] if c["chunk_index"] == 0]
    assert body
    assert not any(term.casefold() in c["document"].casefold() for c in abstract)


def test_years_and_citation_counts_vary(first_batch):
    papers = first_batch["papers"]
    years = {p["year"] for p in papers if p["year"] is not None}
    counts = [p["citation_count"] for p in papers]
    assert min(years) < 1995 and max(years) > 2020 and len(years) > 20
    assert any(p["year"] is None for p in papers)
    assert min(counts) == 0 and max(counts) > 100 and len(set(counts)) > 20
