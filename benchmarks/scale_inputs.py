"""Corpus shape inputs of docs/SCALE.md, measured on the real samples in shared/data with the
project's own reader and chunker: how many citations carry an abstract, how long chunk documents
are, and how many chunks a full-text paper yields under candle-fire's cap of 6 sections.

Run: .venv/bin/python -m benchmarks.scale_inputs
"""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET  # the shared PMC test files, not untrusted input

from benchmarks.throughput_models import shared_data
from candlefire_pipeline.corpus.chunking import MAX_SECTIONS, chunk_paper
from candlefire_pipeline.corpus.medline import read_medline
from candlefire_pipeline.corpus.records import Accepted


def _text(elem: ET.Element | None) -> str:
    return " ".join(" ".join(elem.itertext()).split()) if elem is not None else ""


def medline_sample() -> dict:
    """Citations of a real MEDLINE update file through read_medline + chunk_paper."""
    path = shared_data() / "medline" / "medline16n0902.xml.gz"
    papers = [o.paper for o in read_medline(path).outcomes if isinstance(o, Accepted)]
    chunks = [c for p in papers for c in chunk_paper(p)]
    return {
        "file": path.name,
        "papers": len(papers),
        "with_abstract": sum(1 for p in papers if p["abstract"]),
        "chunks": len(chunks),
        "mean_chars": statistics.mean(len(c["document"]) for c in chunks),
    }


def _pmc_paper(path) -> dict:
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


def pmc_sample() -> dict:
    papers = [_pmc_paper(p) for p in sorted((shared_data() / "pmc").glob("*.nxml"))]
    counts = [len(chunk_paper(p)) for p in papers if p["full_text"]]
    docs = [c["document"] for p in papers for c in chunk_paper(p)]
    return {
        "papers": len(counts),
        "mean_chunks": statistics.mean(counts),
        "at_cap": sum(1 for n in counts if n == MAX_SECTIONS),
        "counts": counts,
        "mean_chars": statistics.mean(len(d) for d in docs),
    }


def main() -> None:
    medline, pmc = medline_sample(), pmc_sample()
    share = medline["with_abstract"] / medline["papers"]
    markdown = "\n".join(
        [
            "Corpus shape, through the project's reader and chunker (`read_medline`,"
            " `chunk_paper`):\n",
            "| sample | papers | measured |",
            "|---|---:|---|",
            f"| MEDLINE update file `{medline['file']}` | {medline['papers']} |"
            f" {medline['with_abstract']} with an abstract ({share:.1%}); one chunk each;"
            f" mean chunk document {medline['mean_chars']:.0f} chars |",
            f"| PMC open-access full text (`pmc/*.nxml`) | {pmc['papers']} |"
            f" {pmc['mean_chunks']:.2f} chunks per paper (counts {pmc['counts']});"
            f" {pmc['at_cap']} of {pmc['papers']} at the cap of {MAX_SECTIONS};"
            f" mean chunk document {pmc['mean_chars']:.0f} chars |",
        ]
    )
    print(markdown)
    from benchmarks.helpers import write_section

    write_section("scale-inputs", markdown)


if __name__ == "__main__":
    main()
