"""An ALS-style fixture corpus whose similarities can be worked out by hand.

Every document uses each word once, so with a collision-free HashingEmbedder the cosine of
a query with q distinct words and a document with m words sharing s of them is s / sqrt(q*m).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from candlefire_pipeline.corpus import schema
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.settings import RetrievalSettings

HASHING_MODEL = "hashing-v1:{dim}"


@dataclass(frozen=True)
class Paper:
    pmid: str
    year: int | None
    citation_count: int
    chunks: tuple[tuple[str, str], ...]  # (section, document); the first is the abstract chunk


PAPERS = (
    # query words: spg302 synaptic als (q = 3)
    Paper("1001", 2019, 3, (("abstract", "SPG302 synaptic ALS mice"),)),
    Paper("1002", 2024, 0, (("abstract", "SPG 302 synaptic ALS trial"),)),
    Paper(
        "1003",
        2021,
        40,
        (("abstract", "Synaptic regeneration compound"), ("results", "SPG-302 grip strength ALS")),
    ),
    Paper("1004", 2015, 300, (("abstract", "TDP-43 aggregation ALS"),)),
    Paper("1005", 1995, 1000, (("abstract", "SOD1 familial mutations"),)),
    Paper("1006", 2011, 800, (("abstract", "C9orf72 repeat expansion ALS FTD dementia"),)),
    Paper(
        "1007",
        2008,
        10,
        (
            ("abstract", "Riluzole survival benefit"),
            ("discussion", "ATXN2 intermediate repeats modify risk"),
        ),
    ),
    Paper("1008", None, 5, (("abstract", "Mitochondrial dysfunction Parkinson disease"),)),
)

QUERY = "SPG302 synaptic ALS"
ENTITIES = ("TDP-43", "SOD1", "C9orf72", "FTD")
TERMS = ("SPG302", "ATXN2", "TDP43", "XYZ999")

#: Small lists so that only clearly separated similarities decide a rank.
SETTINGS = RetrievalSettings(semantic_n=3, entity_hits=1)


def vocabulary() -> list[str]:
    texts = [QUERY, *ENTITIES] + [doc for paper in PAPERS for _, doc in paper.chunks]
    return sorted({word for text in texts for word in re.findall(r"\w+", text.lower())})


def word_buckets(dim: int) -> set[int]:
    """The vector index each vocabulary word lands in (a word alone is a one-hot vector)."""
    vectors = HashingEmbedder(dim=dim).embed(vocabulary())
    return set(np.abs(vectors).argmax(axis=1).tolist())


def collision_free_dim(start: int = 128, stop: int = 2000) -> int:
    """The first dimension (under pgvector's 2,000-dim HNSW limit) with no two words sharing
    a bucket, which makes every cosine exactly s / sqrt(q*m)."""
    for dim in range(start, stop + 1):
        if len(word_buckets(dim)) == len(vocabulary()):
            return dim
    raise AssertionError("no collision-free hashing dimension for the fixture vocabulary")


HASHING_DIM = collision_free_dim()


def embedder(dim: int = HASHING_DIM) -> HashingEmbedder:
    return HashingEmbedder(dim=dim, model_id=HASHING_MODEL.format(dim=dim))


def chunk_id(paper: Paper, index: int) -> str:
    # candle-fire's quirk: an abstract-only paper's single chunk is the bare pmid
    return paper.pmid if len(paper.chunks) == 1 else f"{paper.pmid}_s{index}"


def store_rows(embed) -> pa.Table:
    """The corpus as one store_schema(dim) table embedded with `embed`."""
    records = []
    for paper in PAPERS:
        for index, (section, document) in enumerate(paper.chunks):
            records.append(
                {
                    "chunk_id": chunk_id(paper, index),
                    "pmid": paper.pmid,
                    "section": section,
                    "chunk_index": index,
                    "title": paper.chunks[0][1],
                    "year": paper.year,
                    "doi": f"10.1000/{paper.pmid}",
                    "citation_count": paper.citation_count,
                    "entity_names": "",
                    "mesh_terms": "",
                    "has_full_text": len(paper.chunks) > 1,
                    "document": document,
                    "content_hash": hashlib.sha256(document.encode()).hexdigest(),
                    "paper_hash": hashlib.sha256(paper.pmid.encode()).hexdigest(),
                }
            )
    vectors = np.asarray(embed.embed([r["document"] for r in records]), dtype=np.float32)
    return schema.store_rows(records, vectors, "als-fixture", embed.model_id, embed.dim)
