"""Real ingest batches for operation tests: drop file -> papers -> chunks -> embeddings.

`write_batch(batches_dir, key, records, deletes)` runs the real corpus and embedding stages
(hashing embedder, 16-dim) into `batches_dir/key`; records are candle-fire JSON records, deletes
become a MEDLINE DeleteCitation (then the drop is XML and records must be abstract-only).
"""

from __future__ import annotations

import json
from pathlib import Path

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.embedding import EmbeddingCache, HashingEmbedder, write_embeddings
from candlefire_pipeline.operations.indexing import apply_batch

EMBEDDER = HashingEmbedder(dim=16, model_id="hashing-v1:16")


def paper(pmid: str, version: str = "v1", sections: int = 0, **fields) -> dict:
    """A record whose text names its version; `sections` > 0 gives it that many full-text ones."""
    full_text = "\n".join(
        f"[Part {i}]\n{version} body {i} of {pmid}" for i in range(1, sections + 1)
    )
    record = {
        "pmid": pmid,
        "title": f"{version} title of {pmid}",
        "abstract": f"{version} abstract of {pmid} about SOD1",
        "year": 2020,
        "full_text": full_text or None,
        "citation_count": 1,
    }
    return record | fields


def _medline(records: list[dict], deletes: list[str]) -> str:
    articles = "".join(
        f"<PubmedArticle><MedlineCitation><PMID>{r['pmid']}</PMID><Article>"
        f"<ArticleTitle>{r['title']}</ArticleTitle><Abstract><AbstractText>{r['abstract']}"
        "</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>"
        for r in records
    )
    gone = "".join(f"<PMID>{pmid}</PMID>" for pmid in deletes)
    return f"<PubmedArticleSet>{articles}<DeleteCitation>{gone}</DeleteCitation></PubmedArticleSet>"


def write_batch(
    batches_dir: Path, key: str, records: list[dict], deletes: list[str] | None = None
) -> Path:
    """Run papers, chunks and embeddings for one drop; return the batch directory."""
    drops = batches_dir.parent / "drops"
    drops.mkdir(parents=True, exist_ok=True)
    if deletes:
        drop = drops / f"{key}.xml"
        drop.write_text(_medline(records, deletes))
    else:
        drop = drops / f"{key}.jsonl"
        drop.write_text("".join(json.dumps(r) + "\n" for r in records))
    batch_dir = batches_dir / key
    write_papers(drop, batch_dir)
    write_chunks(batch_dir)
    cache = EmbeddingCache(batches_dir.parent / "cache" / "embeddings.sqlite")
    chunks, embeddings = batch_dir / "chunks.parquet", batch_dir / "embeddings.parquet"
    write_embeddings(chunks, embeddings, EMBEDDER, cache)
    return batch_dir


def apply(backend, batches_dir: Path, key: str):
    """apply_batch with the test embedder's model."""
    return apply_batch(backend, batches_dir, key, EMBEDDER.model_id, EMBEDDER.dim)
