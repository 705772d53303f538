"""SciFact split into drop files for the incremental benchmark: base, full corpus, and a drop of
new and updated papers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.data import scifact_records

#: Appended to an updated paper's abstract: a real content change (new paper and chunk hash).
UPDATE_NOTE = " [Revised abstract: corrected figures in the results.]"


@dataclass(frozen=True)
class Drops:
    full: Path  # every paper, original versions
    base: Path  # every paper except the new ones
    drop: Path  # the new papers + updated versions of some base papers
    papers: int
    base_papers: int
    new_papers: int
    updated_papers: int


def _write(path: Path, papers: list[dict]) -> Path:
    with path.open("w") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in papers)
    return path


def _updated(paper: dict) -> dict:
    return {**paper, "abstract": paper["abstract"] + UPDATE_NOTE}


def make_drops(work: Path, new: int = 150, updates: int = 50, papers: int | None = None) -> Drops:
    """Of the first `papers` SciFact papers (all by default), the last `new` arrive in the drop;
    evenly spaced base papers get an update in it."""
    papers = scifact_records(papers)
    if new >= len(papers):
        raise ValueError(f"{new} new papers of {len(papers)}: the base would be empty")
    base, fresh = papers[:-new], papers[-new:]
    step = max(1, len(base) // updates)
    changed = [_updated(p) for p in base[::step][:updates]]
    return Drops(
        full=_write(work / "full.jsonl", papers),
        base=_write(work / "base.jsonl", base),
        drop=_write(work / "drop.jsonl", fresh + changed),
        papers=len(papers),
        base_papers=len(base),
        new_papers=len(fresh),
        updated_papers=len(changed),
    )
