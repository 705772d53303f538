"""Corpus shape inputs of docs/SCALE.md, measured on the real samples in shared/data with the
project's own reader and chunker: how many citations carry an abstract, how long chunk documents
are, and how many chunks a full-text paper yields under candle-fire's cap of 6 sections.
"""

from __future__ import annotations

import statistics

from benchmarks.common.data import shared_data
from benchmarks.common.texts import pmc_files, pmc_paper
from candlefire_pipeline.corpus.chunking import MAX_SECTIONS, chunk_paper
from candlefire_pipeline.corpus.medline import read_medline
from candlefire_pipeline.corpus.records import Accepted


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


def pmc_sample() -> dict:
    papers = [pmc_paper(p) for p in pmc_files()]
    counts = [len(chunk_paper(p)) for p in papers if p["full_text"]]
    docs = [c["document"] for p in papers for c in chunk_paper(p)]
    return {
        "papers": len(counts),
        "mean_chunks": statistics.mean(counts),
        "at_cap": sum(1 for n in counts if n == MAX_SECTIONS),
        "counts": counts,
        "mean_chars": statistics.mean(len(d) for d in docs),
    }


def run(args, out) -> None:
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
    out.section("scale-inputs", markdown)
