"""SciFact split into drop files for bench_incremental: base, full corpus, and a 200-paper drop."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.settings import REPO_ROOT

#: Appended to an updated paper's abstract: a real content change (new paper and chunk hash).
UPDATE_NOTE = " [Revised abstract: corrected figures in the results.]"


def shared_data() -> Path:
    return Path(os.environ.get("CANDLEFIRE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def scifact_lines() -> list[dict]:
    with (shared_data() / "scifact" / "corpus.jsonl").open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


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


def make_drops(work: Path, new: int = 150, updates: int = 50) -> Drops:
    """The last `new` papers arrive in the drop; evenly spaced base papers get an update in it."""
    papers = scifact_lines()
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
