"""A deterministic, synthetic ALS-style demo corpus written as drop files (no third-party text).

The records are generated from project-written templates with a fixed seed; they read like
PubMed records but state no real findings. Three drops arrive in lexicographic file-name order:

- ``0001-demo-initial.jsonl``: FIRST_DROP_PAPERS papers plus three lines that are rejected
  (truncated JSON, a record without a pmid, and the first of two records of one pmid).
- ``0002-demo-updates.jsonl``: changed versions of a few papers, an abstract-only paper that
  gains full text, new papers, and one truncated JSON line.
- ``0003-demo-medline.xml``: a PubmedArticleSet with new citations and a DeleteCitation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from xml.sax.saxutils import escape

from candlefire_pipeline.corpus import demo_vocab as vocab
from candlefire_pipeline.fsutil import write_atomic

DEMO_SEED = 20250607
PMID_BASE = 90_000_000  # far above real PMIDs, so demo records never shadow real ones
FIRST_DROP = "0001-demo-initial.jsonl"
UPDATE_DROP = "0002-demo-updates.jsonl"
MEDLINE_DROP = "0003-demo-medline.xml"
FIRST_DROP_PAPERS = 180
#: Paper numbers (1-based) with a fixed role, so the demo's edge cases never depend on the dice.
WIDE_PAPER = 1  # full text, > 6 sections, preamble before the first marker, a long [..] line
GAINS_FULL_TEXT = 2  # abstract-only in drop 1, full text in drop 2
UPDATED_PAPERS = (3, 4, 5)  # new citation counts and a changed abstract in drop 2
DELETED_PAPER = 6  # removed by the MEDLINE DeleteCitation in drop 3
NO_YEAR_PAPER = 7  # year unknown (null), doi empty
DUPLICATED_PAPER = 10  # re-sent with a corrected doi later in drop 1; the first record loses
NEW_IN_UPDATE = 4  # brand-new papers in drop 2
NEW_IN_MEDLINE = 2  # PubmedArticles in drop 3
_SPELLINGS = [(drug, s) for drug, spellings in vocab.DRUG_SPELLINGS.items() for s in spellings]


def demo_pmid(number: int) -> str:
    """PMID of demo paper `number` (1-based)."""
    return str(PMID_BASE + number)


def write_demo_drops(drops_dir: Path) -> list[Path]:
    """Write the three demo drops into drops_dir (same bytes on every call); return their paths."""
    rng = random.Random(DEMO_SEED)
    generated = [_paper(rng, n) for n in range(1, FIRST_DROP_PAPERS + 1)]
    papers = [paper for paper, _ in generated]
    first = [json.dumps(p) for p in papers]
    # Malformed lines go in from the back so the earlier insert positions stay valid.
    # A corrected re-send of an earlier record: the last record of a pmid wins, the first is
    # rejected as a duplicate.
    original = papers[DUPLICATED_PAPER - 1]
    duplicate = dict(original, doi=f"10.5555/cfdemo.{original['pmid']}.v2")
    first.insert(150, json.dumps(duplicate))
    first.insert(100, json.dumps({k: v for k, v in papers[99].items() if k != "pmid"}))
    first.insert(50, json.dumps(papers[49])[:-40])
    drops_dir = Path(drops_dir)
    drops_dir.mkdir(parents=True, exist_ok=True)
    return [
        write_atomic(drops_dir / FIRST_DROP, "\n".join(first) + "\n"),
        write_atomic(drops_dir / UPDATE_DROP, "\n".join(_update_lines(rng, generated)) + "\n"),
        write_atomic(drops_dir / MEDLINE_DROP, _medline_xml(rng)),
    ]


def _topic(rng: random.Random, number: int) -> dict[str, str]:
    """The template slots of one paper; the first papers cycle through every drug spelling."""
    cycling = number <= len(_SPELLINGS)
    drug, spelling = _SPELLINGS[number - 1] if cycling else rng.choice(_SPELLINGS)
    outcome = rng.choice(vocab.OUTCOMES)
    return {
        "drug_name": drug,
        "drug": spelling,
        "gene": rng.choice(vocab.GENES),
        "model": rng.choice(vocab.MODELS),
        "outcome": outcome,
        "outcome_cap": outcome[0].upper() + outcome[1:],
        "design": rng.choice(vocab.DESIGNS),
        "design_short": rng.choice(vocab.DESIGN_SHORT),
        "digit": str(rng.randint(1, 9)),
        "pct": str(rng.randint(10, 60)),
    }


def _paper(rng: random.Random, number: int) -> tuple[dict, dict[str, str]]:
    """One papers.jsonl record in candle-fire's shape, and the slots it was written from."""
    slots = _topic(rng, number)
    abstract = _abstract(rng, slots)
    with_full_text = number == WIDE_PAPER or (number != GAINS_FULL_TEXT and rng.random() < 0.55)
    full_text = _full_text(rng, slots, wide=number == WIDE_PAPER) if with_full_text else None
    year = None if number == NO_YEAR_PAPER else rng.randint(1990, 2025)
    no_doi = number == NO_YEAR_PAPER or rng.random() < 0.1
    entities = [slots["drug_name"], slots["gene"]]
    if rng.random() < 0.5:
        entities.append("amyotrophic lateral sclerosis")
    record = {
        "pmid": demo_pmid(number),
        "title": rng.choice(vocab.TITLE_TEMPLATES).format(**slots),
        "abstract": abstract,
        "authors": _authors(rng),
        "year": year,
        "doi": "" if no_doi else f"10.5555/cfdemo.{demo_pmid(number)}",
        "mesh_terms": rng.sample(vocab.MESH_TERMS, rng.randint(3, 6)),
        "full_text": full_text,
        "citation_count": min(int(rng.paretovariate(1.1) * 4) - 4, 2500),
        "entity_names": entities,
    }
    return record, slots


def _abstract(rng: random.Random, slots: dict[str, str]) -> str:
    first, evaluated, *rest = vocab.ABSTRACT_SENTENCES
    chosen = [first, evaluated] + rng.sample(rest, rng.randint(2, 4))
    return " ".join(s.format(**slots) for s in chosen)


def _section_body(rng: random.Random, title: str, slots: dict[str, str]) -> str:
    pool = vocab.SECTION_SENTENCES[title]
    return " ".join(s.format(**slots) for s in rng.sample(pool, min(len(pool), rng.randint(2, 4))))


def _full_text(rng: random.Random, slots: dict[str, str], wide: bool = False) -> str:
    """Full text with `[Section]` marker lines; wide papers exceed the six-section cap."""
    core = list(vocab.CORE_SECTIONS)
    if not wide and rng.random() < 0.3:
        core.remove("Conclusion")
    extras = vocab.EXTRA_SECTIONS if wide else rng.sample(vocab.EXTRA_SECTIONS, rng.randint(0, 3))
    titles = core[:2] + list(extras[:1]) + core[2:] + list(extras[1:])
    lines: list[str] = []
    if wide or rng.random() < 0.25:
        lines += [line.format(**slots) for line in vocab.PREAMBLE_LINES]
    for title in titles:
        lines.append(f"[{title}]")
        if title == "Methods" and wide:
            lines.append(vocab.LONG_BRACKET_LINE)
        if title == "Data Availability" and (wide or rng.random() < 0.3):
            continue  # an empty section: the chunker drops it
        lines.append(_section_body(rng, title, slots))
    return "\n".join(lines)


def _authors(rng: random.Random) -> list[str]:
    return [
        f"{rng.choice(vocab.SURNAMES)} {rng.choice(vocab.INITIALS)}{rng.choice(vocab.INITIALS)}"
        for _ in range(rng.randint(1, 6))
    ]


def _update_lines(rng: random.Random, generated: list[tuple[dict, dict]]) -> list[str]:
    """Drop 2: changed papers, full text for an abstract-only paper, new papers, one bad line."""
    records = []
    for number in UPDATED_PAPERS:
        paper, _ = generated[number - 1]
        records.append(
            dict(
                paper,
                citation_count=paper["citation_count"] + 25,
                abstract=paper["abstract"] + " Follow-up data were added in this version.",
            )
        )
    gaining, slots = generated[GAINS_FULL_TEXT - 1]
    records.append(dict(gaining, full_text=_full_text(rng, slots)))
    first_new = FIRST_DROP_PAPERS + 1
    records += [_paper(rng, n)[0] for n in range(first_new, first_new + NEW_IN_UPDATE)]
    lines = [json.dumps(r) for r in records]
    lines.insert(2, '{"pmid": "' + demo_pmid(999) + '", "title": "Truncated in transit')
    return lines


def _medline_xml(rng: random.Random) -> str:
    """Drop 3: a small MEDLINE update file with new citations and one DeleteCitation."""
    first_new = FIRST_DROP_PAPERS + NEW_IN_UPDATE + 1
    articles = [
        _pubmed_article(_paper(rng, n)[0]) for n in range(first_new, first_new + NEW_IN_MEDLINE)
    ]
    pmid = demo_pmid(DELETED_PAPER)
    deleted = f'<DeleteCitation><PMID Version="1">{pmid}</PMID></DeleteCitation>'
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<PubmedArticleSet>\n'
        + "\n".join(articles)
        + f"\n{deleted}\n</PubmedArticleSet>\n"
    )


def _pubmed_article(paper: dict) -> str:
    authors = "".join(
        f"<Author><LastName>{escape(last)}</LastName><Initials>{escape(initials)}</Initials>"
        "</Author>"
        for last, initials in (name.split(" ") for name in paper["authors"])
    )
    mesh = "".join(
        f"<MeshHeading><DescriptorName>{escape(term)}</DescriptorName></MeshHeading>"
        for term in paper["mesh_terms"]
    )
    year = paper["year"] or 2024
    return (
        f'<PubmedArticle><MedlineCitation Status="MEDLINE"><PMID Version="1">{paper["pmid"]}'
        f"</PMID><Article><Journal><JournalIssue><PubDate><Year>{year}</Year></PubDate>"
        f"</JournalIssue></Journal><ArticleTitle>{escape(paper['title'])}</ArticleTitle>"
        f"<Abstract><AbstractText>{escape(paper['abstract'])}</AbstractText></Abstract>"
        f"<AuthorList>{authors}</AuthorList></Article><MeshHeadingList>{mesh}</MeshHeadingList>"
        f'</MedlineCitation><PubmedData><ArticleIdList><ArticleId IdType="pubmed">{paper["pmid"]}'
        f'</ArticleId><ArticleId IdType="doi">10.5555/cfdemo.{paper["pmid"]}</ArticleId>'
        "</ArticleIdList></PubmedData></PubmedArticle>"
    )
