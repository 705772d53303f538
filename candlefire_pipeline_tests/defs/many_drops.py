"""Many small overlapping drop files: new papers, updates, full text arriving, deletes, re-adds.

Every drop draws its papers from one small PMID pool, so almost every paper appears in several
drops and the result depends on applying them in file-name order.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

POOL = [str(710_000 + i) for i in range(24)]
TOPICS = ["SOD1", "TDP-43", "C9orf72", "SPG302", "FUS", "riluzole", "tofersen", "edaravone"]


def _record(pmid: str, version: int, rng: random.Random) -> dict:
    topic = rng.choice(TOPICS)
    full_text = None
    if rng.random() < 0.4:  # full text arrives (or changes): more than one chunk for the paper
        sections = rng.sample(["Introduction", "Methods", "Results", "Discussion"], k=2)
        full_text = "\n".join(f"[{s}]\n{s} of {topic} in drop {version}." for s in sections)
    return {
        "pmid": pmid,
        "title": f"{topic} in ALS ({pmid})",
        "abstract": f"Version {version} of {pmid}: {topic} and motor neuron loss.",
        "authors": ["A. Author"],
        "year": 2000 + version,
        "doi": "",
        "mesh_terms": ["Amyotrophic Lateral Sclerosis"],
        "full_text": full_text,
        "citation_count": version,
        "entity_names": [topic],
    }


def _medline(pmids_added: list[str], pmids_deleted: list[str], version: int) -> str:
    articles = "".join(
        f"<PubmedArticle><MedlineCitation><PMID Version='1'>{pmid}</PMID><Article>"
        f"<Journal><JournalIssue><PubDate><Year>{2000 + version}</Year></PubDate></JournalIssue>"
        f"</Journal><ArticleTitle>MEDLINE {pmid}</ArticleTitle><Abstract><AbstractText>"
        f"Version {version} of {pmid} from MEDLINE.</AbstractText></Abstract></Article>"
        "</MedlineCitation></PubmedArticle>"
        for pmid in pmids_added
    )
    deletes = "".join(f"<PMID Version='1'>{pmid}</PMID>" for pmid in pmids_deleted)
    return (
        "<?xml version='1.0'?><PubmedArticleSet>"
        f"<DeleteCitation>{deletes}</DeleteCitation>{articles}</PubmedArticleSet>"
    )


def write_many_drops(drops_dir: Path, count: int = 20, seed: int = 13) -> list[str]:
    """Write `count` drops (every fifth a MEDLINE file with deletes); their keys in order."""
    rng = random.Random(seed)
    drops_dir.mkdir(parents=True, exist_ok=True)
    keys = []
    for version in range(1, count + 1):
        if version % 5 == 0:
            key = f"{version:04d}-update.xml"
            text = _medline(rng.sample(POOL, 2), rng.sample(POOL, 3), version)
        else:
            key = f"{version:04d}-drop.jsonl"
            papers = [_record(pmid, version, rng) for pmid in rng.sample(POOL, 5)]
            text = "".join(json.dumps(p) + "\n" for p in papers)
        (drops_dir / key).write_text(text)
        keys.append(key)
    return keys
