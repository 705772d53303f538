"""An app collection built by candle-fire's indexing rules (docs/ARCHITECTURE.md, "How the app's
collection was built"), written here independently of the project's chunker:

- papers.jsonl -> chunks: sections split on lines holding only `[Title]` (< 80 characters),
  "Abstract" first, priority sections first, at most 6, ids `{pmid}_s{i}`; abstract-only: the bare
  pmid, document title + mesh terms + abstract;
- metadata exactly pmid, title, year (as written, 0 when absent), doi, citation_count,
  entity_names and mesh_terms (first 10) comma-joined, has_full_text int 0/1, section,
  chunk_index; a persisted Chroma folder, collection `als_papers`, cosine space;
- `add` in batches of 100 of only the ids not yet in the collection: an id once added is never
  updated or deleted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

PRIORITY = {"abstract", "introduction", "results", "discussion", "conclusion", "methods"}
COLLECTION = "als_papers"


def _sections(paper: dict) -> list[tuple[str, str]]:
    found, title, lines = [], "Abstract", [paper["abstract"]]
    for line in paper["full_text"].split("\n"):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]") and len(stripped) < 80:
            body = "\n".join(lines).strip()
            if body:
                found.append((title, body))
            title, lines = stripped[1:-1], []
        else:
            lines.append(line)
    body = "\n".join(lines).strip()
    if body:
        found.append((title, body))
    first = [s for s in found if s[0].lower() in PRIORITY]
    return (first + [s for s in found if s[0].lower() not in PRIORITY])[:6]


def app_chunks(paper: dict) -> list[dict]:
    meta = {
        "pmid": paper["pmid"], "title": paper["title"], "year": paper.get("year", 0),
        "doi": paper.get("doi", ""), "citation_count": paper.get("citation_count", 0),
        "entity_names": ",".join(paper.get("entity_names", [])),
        "mesh_terms": ",".join(paper.get("mesh_terms", [])[:10]),
        "has_full_text": int(bool(paper.get("full_text"))),
    }  # fmt: skip
    sections = _sections(paper) if paper.get("full_text") else []
    if sections:
        return [
            {"id": f"{paper['pmid']}_s{i}", "document": f"{paper['title']}\n[{name}]\n{text}",
             "metadata": {**meta, "section": name, "chunk_index": i}}
            for i, (name, text) in enumerate(sections)
        ]  # fmt: skip
    mesh = " ".join(paper.get("mesh_terms", []))
    return [{"id": paper["pmid"], "document": f"{paper['title']}\n{mesh}\n{paper['abstract']}",
             "metadata": {**meta, "section": "abstract", "chunk_index": 0}}]  # fmt: skip


def index_papers(
    folder: Path,
    papers: list[dict],
    embed=None,
    collection: str = COLLECTION,
    embedding_function=None,
    vectors: dict | None = None,
) -> int:
    """candle-fire's build_collection over `papers` into `folder`; the vectors come from
    `embed(texts)` (what the collection's embedding function would give), from `vectors` (chunk
    id -> recorded vector), or from the collection's own `embedding_function` (as candle-fire's
    does); returns the chunks added."""
    client = chromadb.PersistentClient(
        str(folder), settings=ChromaSettings(anonymized_telemetry=False)
    )
    try:
        target = client.get_or_create_collection(
            collection, metadata={"hnsw:space": "cosine"}, embedding_function=embedding_function
        )
        existing = set(target.get(include=[])["ids"])
        new = [c for p in papers for c in app_chunks(p) if c["id"] not in existing]
        for start in range(0, len(new), 100):
            batch = new[start : start + 100]
            target.add(
                ids=[c["id"] for c in batch],
                documents=[c["document"] for c in batch],
                metadatas=[c["metadata"] for c in batch],
                embeddings=_vectors(batch, embed, vectors),
            )
        return len(new)
    finally:
        client.close()


def write_papers_jsonl(path: Path, papers: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p) + "\n" for p in papers))
    return path


def _vectors(batch: list[dict], embed, vectors: dict | None):
    if vectors is not None:
        return np.stack([vectors[c["id"]] for c in batch]).astype(np.float32)
    if embed is not None:
        return np.asarray(embed([c["document"] for c in batch]), np.float32)
    return None  # the collection's embedding function embeds the documents


def app_rows(folder: Path, tmp: Path) -> list[tuple[str, str, np.ndarray]]:
    """(id, document, vector) in the app collection's order, read from a copy of its folder."""
    copy = tmp / "app-copy"
    shutil.copytree(folder, copy)
    client = chromadb.PersistentClient(
        str(copy), settings=ChromaSettings(anonymized_telemetry=False)
    )
    got = client.get_collection("als_papers").get(include=["documents", "embeddings"])
    client.close()
    vectors = np.asarray(got["embeddings"], dtype=np.float32)
    return list(zip(got["ids"], got["documents"], vectors, strict=True))
