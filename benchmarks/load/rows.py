"""Synthetic store_schema rows for the load benchmark: ~1,000-character documents, unit random
vectors."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, store_rows

MODEL_ID = "bench-synthetic"
CHUNKS_PER_PAPER = 3
DOC_CHARS = 1_000
VOCAB_WORDS = 8_000


def _vocabulary(rng: np.random.Generator) -> np.ndarray:
    """Pseudo-words of 3..12 letters, so the trigram index sees a realistic spread of grams."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 13, VOCAB_WORDS)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def _documents(n: int, rng: np.random.Generator) -> list[str]:
    """n documents of about DOC_CHARS characters each (words drawn from one vocabulary)."""
    vocab = _vocabulary(rng)
    words_per_doc = DOC_CHARS // 8 + 20  # mean word length ~7.5 plus a space
    picks = rng.integers(0, VOCAB_WORDS, (n, words_per_doc))
    return [" ".join(vocab[row])[:DOC_CHARS] for row in picks]


def _hex_digests(values: list[str]) -> list[str]:
    return [hashlib.sha256(v.encode()).hexdigest() for v in values]


def synthetic_rows(n: int, dim: int = 384, seed: int = 0) -> pa.Table:
    """n chunk rows (CHUNKS_PER_PAPER per paper) in store_schema(dim), deterministic per seed."""
    rng = np.random.default_rng(seed)
    index = np.arange(n)
    pmids = [str(30_000_000 + i) for i in index // CHUNKS_PER_PAPER]
    chunk_index = (index % CHUNKS_PER_PAPER).astype(np.int32)
    chunk_ids = [f"{p}:{c}" for p, c in zip(pmids, chunk_index, strict=True)]
    documents = _documents(n, rng)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    years = rng.integers(1990, 2026, n).astype(np.int32)
    columns = {
        "chunk_id": chunk_ids,
        "pmid": pmids,
        "section": np.where(chunk_index == 0, "Abstract", "Results").tolist(),
        "chunk_index": chunk_index,
        "title": [f"Synthetic paper {p} on motor neuron biology" for p in pmids],
        "year": pa.array(years, mask=index % 50 == 0),  # some unknown years (NULL)
        "doi": [f"10.1000/syn.{p}" for p in pmids],
        "citation_count": rng.integers(0, 500, n).astype(np.int32),
        "entity_names": ["TDP-43,SOD1,C9orf72"] * n,
        "mesh_terms": ["Amyotrophic Lateral Sclerosis,Motor Neurons"] * n,
        "has_full_text": chunk_index > 0,
        "document": documents,
        "content_hash": _hex_digests(chunk_ids),
        "paper_hash": _hex_digests(pmids),
    }
    chunks = pa.Table.from_pydict(columns, schema=CHUNK_SCHEMA)
    return store_rows(chunks, vectors, "bench-load", MODEL_ID, dim)


def python_rows(rows: pa.Table, columns: tuple[str, ...]) -> list[list]:
    """Rows as Python lists in `columns` order, embeddings as numpy float32 vectors."""
    dim = rows.schema.field("embedding").type.list_size
    matrix = rows["embedding"].combine_chunks().flatten().to_numpy().reshape(-1, dim)
    values = {
        name: list(matrix) if name == "embedding" else rows[name].to_pylist() for name in columns
    }
    return [list(row) for row in zip(*(values[name] for name in columns), strict=True)]
