"""candle-fire's recorded conformance fixtures: corpus, queries, what its retriever returned."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.corpus.schema import store_rows

#: The model candle-fire's collection was built with; the queries must be embedded with it.
FIXTURE_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
#: Stage lists of a recorded query, in the order candle-fire's app fuses them.
STAGES = ("search", "search_by_entities", "search_by_keyword")
FILES = ("papers.jsonl", "queries.jsonl", "expected.jsonl", "embeddings.npy", "embedding_ids.txt")


class ConformanceFixtureError(ValueError):
    """The fixture folder is missing, incomplete or does not match the project's chunker."""


@dataclass(frozen=True)
class FixtureQuery:
    id: str
    text: str
    entities: tuple[str, ...]
    terms: tuple[str, ...]


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@dataclass(frozen=True)
class ConformanceFixtures:
    """The folder of candle-fire's recorded answers (../shared/data/candlefire_conformance)."""

    root: Path

    @classmethod
    def open(cls, root: Path | str) -> ConformanceFixtures:
        root = Path(root)
        missing = [name for name in FILES if not (root / name).is_file()]
        if missing:
            raise ConformanceFixtureError(
                f"conformance fixtures at {root} lack {', '.join(missing)} (set "
                "CANDLEFIRE_CONFORMANCE_DIR to candle-fire's recorded fixtures folder)"
            )
        return cls(root)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over every fixture file: a result is valid only for the fixtures it ran on."""
        digest = hashlib.sha256()
        for name in FILES:
            digest.update(name.encode())
            digest.update(hashlib.sha256((self.root / name).read_bytes()).digest())
        return digest.hexdigest()

    @cached_property
    def queries(self) -> list[FixtureQuery]:
        return [
            FixtureQuery(q["id"], q["text"], tuple(q.get("entities") or ()),
                         tuple(q.get("terms") or ()))
            for q in _read_jsonl(self.root / "queries.jsonl")
        ]  # fmt: skip

    @cached_property
    def expected(self) -> dict[str, dict]:
        """query id -> candle-fire's recorded answer (see the folder's README)."""
        records = {record["id"]: record for record in _read_jsonl(self.root / "expected.jsonl")}
        missing = [q.id for q in self.queries if q.id not in records]
        if missing:
            raise ConformanceFixtureError(f"expected.jsonl has no answer for {missing[:5]}")
        return records

    def vectors(self) -> dict[str, np.ndarray]:
        """chunk id -> the vector candle-fire's collection stored for it."""
        ids = (self.root / "embedding_ids.txt").read_text(encoding="utf-8").split()
        matrix = np.load(self.root / "embeddings.npy").astype(np.float32)
        if matrix.shape[0] != len(ids):
            raise ConformanceFixtureError(f"{matrix.shape[0]} vectors for {len(ids)} chunk ids")
        return dict(zip(ids, matrix, strict=True))

    def chunks(self) -> list[dict]:
        """The corpus through the project's own papers and chunks stages."""
        with tempfile.TemporaryDirectory(prefix="candlefire-conformance-") as scratch:
            batch = Path(scratch) / "conformance"
            write_papers(self.root / "papers.jsonl", batch)
            write_chunks(batch)
            return pq.read_table(batch / "chunks.parquet").to_pylist()

    def store_rows(self, batch_key: str = "conformance") -> pa.Table:
        """Store rows of the chunked corpus with candle-fire's stored vectors; an error when the
        project's chunker does not yield exactly candle-fire's chunk ids."""
        chunks, vectors = self.chunks(), self.vectors()
        ours, theirs = {c["chunk_id"] for c in chunks}, set(vectors)
        if ours != theirs:
            raise ConformanceFixtureError(
                f"the chunker yields {len(ours)} chunks, candle-fire {len(theirs)}: "
                f"only ours {sorted(ours - theirs)[:5]}, only theirs {sorted(theirs - ours)[:5]}"
            )
        matrix = np.stack([vectors[c["chunk_id"]] for c in chunks])
        return store_rows(chunks, matrix, batch_key, FIXTURE_MODEL_ID, matrix.shape[1])
