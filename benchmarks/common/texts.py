"""Real chunk texts in the chunker's document format: SciFact abstracts and PMC full-text
sections (the shared PMC test files: trusted, so the standard XML parser)."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET  # the shared PMC test files, not untrusted input
from pathlib import Path

import pyarrow as pa

from benchmarks.common.data import shared_data
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA


def abstract_chunks(papers: list[dict]) -> pa.Table:
    """Abstract-only chunks in the chunker's document format (SciFact has no full text)."""
    docs = [f"{p['title']}\n{' '.join(p.get('mesh_terms') or [])}\n{p['abstract']}" for p in papers]
    n = len(papers)
    pmids = [str(p["pmid"]) for p in papers]
    columns = {
        "chunk_id": pmids,
        "pmid": pmids,
        "section": ["abstract"] * n,
        "chunk_index": [0] * n,
        "title": [p["title"] for p in papers],
        "year": [p.get("year") for p in papers],
        "doi": [p.get("doi") or "" for p in papers],
        "citation_count": [p.get("citation_count") or 0 for p in papers],
        "entity_names": [""] * n,
        "mesh_terms": [""] * n,
        "has_full_text": [False] * n,
        "document": docs,
        "content_hash": [hashlib.sha256(doc.encode()).hexdigest() for doc in docs],
        "paper_hash": [""] * n,
    }
    return pa.Table.from_pydict(columns, schema=CHUNK_SCHEMA)


def _text(elem: ET.Element | None) -> str:
    return " ".join(" ".join(elem.itertext()).split()) if elem is not None else ""


def pmc_files() -> list[Path]:
    return sorted((shared_data() / "pmc").glob("*.nxml"))


def pmc_paper(path: Path) -> dict:
    """A PMC JATS article as a candle-fire record: top-level body sections as `[Title]` blocks."""
    root = ET.parse(path).getroot()  # see the import
    body = root.find(".//body")
    sections = [
        f"[{_text(sec.find('title'))}]\n{_text(sec)}"
        for sec in (body.findall("sec") if body is not None else [])
        if sec.find("title") is not None
    ]
    return {
        "pmid": path.stem,
        "title": _text(root.find(".//article-title")),
        "abstract": _text(root.find(".//abstract")),
        "mesh_terms": [],
        "full_text": "\n".join(sections) or None,
    }


def pmc_section_chunks(limit: int) -> list[str]:
    """Full-text chunks in the chunker's format ("{title}\\n[{section}]\\n{text}") from PMC XML."""
    chunks = []
    for path in pmc_files():
        root = ET.parse(path).getroot()  # see the import
        title = _text(root.find(".//article-title"))
        body = root.find(".//body")
        for sec in body.findall("sec") if body is not None else []:
            heading = sec.find("title")
            text = _text(sec)
            if heading is not None and text:
                chunks.append(f"{title}\n[{_text(heading)}]\n{text}")
    return chunks[:limit]
