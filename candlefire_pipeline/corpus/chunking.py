"""candle-fire chunking: one paper -> section-aware chunks (pure, linear in the text size)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

#: Bump when chunk ids, documents or metadata would change for the same paper.
CHUNKER_VERSION = "cf-1"
MAX_SECTIONS = 6
MARKER_MAX_CHARS = 80  # a marker line (stripped, brackets included) is shorter than this
MESH_METADATA_TERMS = 10
PRIORITY_SECTIONS = frozenset(
    {"abstract", "introduction", "results", "discussion", "conclusion", "methods"}
)
_MARKER = re.compile(r"\[([^\[\]]+)\]")

#: Chunk fields that content_hash covers besides chunk_id and document (paper_hash excluded:
#: a change that does not reach the chunk, such as a new author, must not force a re-embed).
HASHED_METADATA = (
    "pmid",
    "section",
    "chunk_index",
    "title",
    "year",
    "doi",
    "citation_count",
    "entity_names",
    "mesh_terms",
    "has_full_text",
)


def _marker_title(line: str) -> str | None:
    """The section title if the line holds only `[Title]` in under 80 characters, else None."""
    stripped = line.strip()
    if len(stripped) >= MARKER_MAX_CHARS or not stripped.startswith("["):
        return None
    match = _MARKER.fullmatch(stripped)
    title = match.group(1).strip() if match else ""
    return title or None


def split_sections(abstract: str, full_text: str) -> list[tuple[str, str]]:
    """(title, text) of every non-empty section in document order, "Abstract" first."""
    sections: list[tuple[str, str]] = []
    title, body = "Abstract", [abstract]
    for line in full_text.split("\n"):
        marker = _marker_title(line)
        if marker is None:
            body.append(line)
            continue
        sections.append((title, "\n".join(body).strip()))
        title, body = marker, []
    sections.append((title, "\n".join(body).strip()))
    return [(name, text) for name, text in sections if text]


def order_sections(sections: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Priority sections first (document order kept within each group), capped at 6."""
    first = [s for s in sections if s[0].lower() in PRIORITY_SECTIONS]
    rest = [s for s in sections if s[0].lower() not in PRIORITY_SECTIONS]
    return (first + rest)[:MAX_SECTIONS]


def content_hash(chunk: dict[str, Any]) -> str:
    """sha256 hex over CHUNKER_VERSION, chunk_id, document and the hashed metadata (canonical)."""
    payload = {
        "chunker": CHUNKER_VERSION,
        "chunk_id": chunk["chunk_id"],
        "document": chunk["document"],
        "metadata": {field: chunk[field] for field in HASHED_METADATA},
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _chunk(
    paper: dict[str, Any], chunk_id: str, section: str, index: int, document: str, full: bool
) -> dict[str, Any]:
    chunk = {
        "chunk_id": chunk_id,
        "pmid": paper["pmid"],
        "section": section,
        "chunk_index": index,
        "title": paper["title"],
        "year": paper.get("year"),
        "doi": paper.get("doi") or "",
        "citation_count": paper.get("citation_count") or 0,
        "entity_names": ",".join(paper.get("entity_names") or []),
        "mesh_terms": ",".join((paper.get("mesh_terms") or [])[:MESH_METADATA_TERMS]),
        "has_full_text": full,
        "document": document,
        "content_hash": "",
        "paper_hash": paper.get("paper_hash") or "",
    }
    chunk["content_hash"] = content_hash(chunk)
    return chunk


def chunk_paper(paper: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of one paper (PAPER_SCHEMA fields in, CHUNK_SCHEMA fields out)."""
    title, abstract = paper["title"] or "", paper["abstract"] or ""
    full_text = paper.get("full_text")
    sections = order_sections(split_sections(abstract, full_text)) if full_text else []
    if sections:
        return [
            _chunk(paper, f"{paper['pmid']}_s{i}", name, i, f"{title}\n[{name}]\n{text}", True)
            for i, (name, text) in enumerate(sections)
        ]
    # Abstract-only path, also taken when full text yields no section (only possible when the
    # abstract is empty and every full-text section is empty). has_full_text is then False:
    # no full-text content reached the chunk, and filters on it must not promise otherwise.
    mesh = " ".join(paper.get("mesh_terms") or [])
    document = f"{title}\n{mesh}\n{abstract}"
    return [_chunk(paper, paper["pmid"], "abstract", 0, document, False)]


#: Chunker version -> chunk function. A chunker change is added beside the old one under a new
#: version (its content_hash carries that version), so a generation built with the old one keeps
#: being fed and can be compared with one built with the new (docs/GENERATIONS.md).
CHUNKERS: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    CHUNKER_VERSION: chunk_paper
}


def chunker(version: str) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """The chunk function of a chunker version; a clear error for an unknown one."""
    try:
        return CHUNKERS[version]
    except KeyError:
        raise ValueError(
            f"unknown chunker version {version!r}; known: {', '.join(sorted(CHUNKERS))}"
        ) from None
