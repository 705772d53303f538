"""candle-fire's chunk records (its indexer's metadata keys and types) to the project's chunk rows,
and papers reconstructed from a paper's chunks.

candle-fire's indexer writes, per chunk: pmid, title, year (as the record has it; 0 when the
record had none), doi, citation_count, entity_names and mesh_terms (comma-joined), has_full_text
(0/1), section, chunk_index. Mapped as the project's own stages would hold the same paper: year
0 means unknown (null), has_full_text a bool, everything else as written. A row that cannot be
mapped (a key missing, a value that is not a scalar of its kind, no document, no vector) is an
AdoptionError naming the chunk id and the key: an adoption never silently drops a row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from candlefire_pipeline.corpus.chunking import MESH_METADATA_TERMS, content_hash
from candlefire_pipeline.corpus.records import PMID_PATTERN, paper_hash
from candlefire_pipeline.operations.adoption.source import AdoptionError, AppPage

#: key -> accepted Python types of the value candle-fire's indexer writes (bool is not an int)
REQUIRED = {
    "pmid": (str, int), "title": (str,), "doi": (str,), "citation_count": (int, float),
    "entity_names": (str,), "mesh_terms": (str,), "has_full_text": (int, bool),
    "section": (str,), "chunk_index": (int, float),
}  # fmt: skip
#: keys the indexer writes when the record has them (absent = unknown)
OPTIONAL = {"year": (int, float, str)}
#: the chunk fields compared between the app's row and the ledger's (besides the document)
COMPARED = (
    "pmid", "section", "chunk_index", "title", "year", "doi", "citation_count",
    "entity_names", "mesh_terms", "has_full_text",
)  # fmt: skip


def _fail(chunk_id: str, what: str) -> AdoptionError:
    return AdoptionError(f"the app's chunk {chunk_id!r}: {what}; nothing was written")


def _value(chunk_id: str, meta: dict, key: str, kinds: tuple) -> Any:
    value = meta[key]
    if isinstance(value, list | dict | tuple) or value is None:
        raise _fail(chunk_id, f"metadata {key!r} is not a scalar ({type(value).__name__})")
    if isinstance(value, bool) and bool not in kinds:
        raise _fail(chunk_id, f"metadata {key!r} is a bool, candle-fire writes {kinds[0].__name__}")
    if not isinstance(value, kinds):
        raise _fail(chunk_id, f"metadata {key!r} is {type(value).__name__} {value!r:.40}, "
                    f"candle-fire writes {kinds[0].__name__}")  # fmt: skip
    return value


def _whole(chunk_id: str, key: str, value: Any, low: int = 0) -> int:
    if isinstance(value, float) and not value.is_integer() or int(value) < low:
        raise _fail(chunk_id, f"metadata {key!r} = {value!r} is not a whole number >= {low}")
    return int(value)


def _year(chunk_id: str, value: Any) -> int | None:
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise _fail(chunk_id, f"metadata 'year' = {value!r:.40} is not a year")
        value = int(value.strip())
    year = _whole(chunk_id, "year", value)
    return year or None  # the indexer's 0 is the record's "no year"


def chunk_row(chunk_id: str, document: Any, meta: Any) -> dict[str, Any]:
    """The project's CHUNK_SCHEMA fields of one app record (paper_hash filled per paper later)."""
    if not isinstance(meta, dict):
        raise _fail(chunk_id, "it has no metadata")
    if not isinstance(document, str) or not document:
        raise _fail(chunk_id, "it has no document")
    missing = [key for key in REQUIRED if key not in meta]
    if missing:
        raise _fail(chunk_id, f"metadata lacks {', '.join(missing)} (candle-fire's indexer "
                    "writes every one)")  # fmt: skip
    got = {key: _value(chunk_id, meta, key, kinds) for key, kinds in REQUIRED.items()}
    year = _value(chunk_id, meta, "year", OPTIONAL["year"]) if "year" in meta else None
    pmid = str(got["pmid"]).strip()
    if not PMID_PATTERN.fullmatch(pmid):
        raise _fail(chunk_id, f"pmid {pmid[:40]!r} is not 1-32 letters/digits")
    row = {
        "chunk_id": chunk_id,
        "pmid": pmid,
        "section": got["section"],
        "chunk_index": _whole(chunk_id, "chunk_index", got["chunk_index"]),
        "title": got["title"],
        "year": None if year is None else _year(chunk_id, year),
        "doi": got["doi"],
        "citation_count": _whole(chunk_id, "citation_count", got["citation_count"]),
        "entity_names": got["entity_names"],
        "mesh_terms": got["mesh_terms"],
        "has_full_text": bool(got["has_full_text"]),
        "document": document,
        "content_hash": "",
        "paper_hash": "",
    }
    row["content_hash"] = content_hash(row)
    return row


def extra_keys(meta: dict) -> list[str]:
    """Metadata keys the indexer does not write (reported, not imported)."""
    return sorted(set(meta) - set(REQUIRED) - set(OPTIONAL))


def page_rows(page: AppPage, dim: int | None) -> tuple[list[dict], np.ndarray]:
    """(chunk rows, float32 vectors) of one page; dim None takes the first row's."""
    if page.documents is None or page.metadatas is None or page.embeddings is None:
        raise AdoptionError("a page was read without documents, metadatas or embeddings")
    rows = [chunk_row(i, d, m) for i, d, m in zip(page.ids, page.documents, page.metadatas,
                                                  strict=True)]  # fmt: skip
    vectors = page.embeddings
    if vectors.ndim != 2 or len(vectors) != len(rows):
        raise _fail(page.ids[0], "the collection returned no stored embedding for some rows")
    if dim is not None and vectors.shape[1] != dim:
        raise _fail(page.ids[0], f"its vector has {vectors.shape[1]} dimensions, the rows "
                    f"before it {dim}")  # fmt: skip
    bad = ~np.isfinite(vectors).all(axis=1) | ~vectors.any(axis=1)
    if bad.any():
        raise _fail(page.ids[int(np.argmax(bad))], "its vector is zero or not finite")
    return rows, vectors


def reconstruct_paper(chunks: list[dict], record_no: int) -> dict[str, Any]:
    """A PAPER_SCHEMA record from one paper's app chunks (in insertion order), as far as the
    chunks tell: the metadata of its newest chunk, the abstract from its abstract chunk, the
    full text from its section chunks (`[Section]` marker lines); no authors (never indexed)."""
    newest = chunks[-1]
    title = newest["title"]
    sections = sorted((c for c in chunks if c["chunk_id"] != c["pmid"]),
                      key=lambda c: c["chunk_index"])  # fmt: skip
    bare = next((c for c in chunks if c["chunk_id"] == c["pmid"]), None)
    abstract, body = "", []
    for chunk in sections:
        text = _after_lines(chunk["document"], 2)
        if chunk["section"].lower() == "abstract" and not abstract:
            abstract = text
        else:
            body.append(f"[{chunk['section']}]\n{text}")
    if not sections and bare is not None:
        abstract = _after_lines(bare["document"], 2)
    paper = {
        "pmid": newest["pmid"],
        "title": title,
        "abstract": abstract,
        "authors": [],
        "year": newest["year"],
        "doi": newest["doi"],
        "mesh_terms": [m for m in newest["mesh_terms"].split(",") if m][:MESH_METADATA_TERMS],
        "full_text": "\n".join(body) or None,
        "citation_count": newest["citation_count"],
        "entity_names": [e for e in newest["entity_names"].split(",") if e],
        "record_no": record_no,
    }
    paper["paper_hash"] = paper_hash(paper)
    return paper


def _after_lines(document: str, lines: int) -> str:
    """The document after its first `lines` lines (the title, then mesh terms or the marker)."""
    parts = document.split("\n", lines)
    return parts[lines] if len(parts) > lines else ""
