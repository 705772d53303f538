"""An app collection of N chunks as candle-fire's indexer writes one (its metadata keys and
types, cosine, one folder), from the retrieval benchmarks' synthetic corpus; its vectors are the
deterministic 384-dim hashing model's, so the adoption's model check names that model. Built once
per size under the benchmarks' cache."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import chromadb
from chromadb.config import Settings as ChromaSettings

from benchmarks.common.data import bench_dir
from benchmarks.common.scaled.corpus import stream_rows
from candlefire_pipeline.embedding import HashingEmbedder

log = logging.getLogger(__name__)

MODEL = HashingEmbedder(dim=384, model_id="hashing-v1:384")
COLLECTION = "als_papers"
ADD_ROWS = 5_000


def _metadata(row: dict) -> dict:
    return {"pmid": row["pmid"], "title": row["title"], "year": row["year"] or 0,
            "doi": row["doi"] or "", "citation_count": row["citation_count"] or 0,
            "entity_names": row["entity_names"] or "", "mesh_terms": row["mesh_terms"] or "",
            "has_full_text": int(row["has_full_text"]), "section": row["section"] or "abstract",
            "chunk_index": row["chunk_index"]}  # fmt: skip


def app_folder(size: int) -> Path:
    """The folder of the app collection of `size` chunks (built on first use)."""
    folder = bench_dir() / "adopt" / f"app-{size}"
    if (folder / ".built").is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    client = chromadb.PersistentClient(
        str(folder), settings=ChromaSettings(anonymized_telemetry=False)
    )
    target = client.create_collection(COLLECTION, metadata={"hnsw:space": "cosine"},
                                      embedding_function=None)  # fmt: skip
    done = 0
    for part in stream_rows(MODEL, size, ADD_ROWS):
        rows = part.drop_columns(["embedding"]).to_pylist()
        docs = [r["document"] for r in rows]
        metadatas = [_metadata(r) for r in rows]
        ids = [r["chunk_id"] for r in rows]
        target.add(ids=ids, documents=docs, metadatas=metadatas, embeddings=MODEL.embed(docs))
        done += len(rows)
        log.info("app collection %d: %d/%d rows", size, done, size)
    client.close()
    (folder / ".built").write_text(str(done))
    return folder
