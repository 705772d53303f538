"""A drill's workload: a loaded corpus as its first ingest batch, then drops that revise, add
and delete papers, written as the batch files the pipeline's readers take (data/batches)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.retirement.ledger import write_batch
from candlefire_pipeline.corpus.schema import DELETED_SCHEMA, store_rows

#: Codes a revision writes into documents, so the term cache's kept lists change with a drop.
CODES = ("SOD1", "TDP-43", "C9orf72", "FUS", "SPG302", "G93A")


def batch_key(number: int) -> str:
    return f"drop-{number:04d}"


class Workload:
    """The papers as store rows (by pmid), and the drops written so far under batches_dir."""

    def __init__(self, rows: pa.Table, batches_dir: Path, seed: int) -> None:
        self.batches_dir, self.rng = Path(batches_dir), random.Random(seed)
        self.model_id = rows["model_id"][0].as_py()
        self.dim = rows.schema.field("embedding").type.list_size
        self.papers: dict[str, pa.Table] = {}
        for pmid, start, length in _runs(rows["pmid"].to_pylist()):
            self.papers[pmid] = rows.slice(start, length)
        self.keys: list[str] = []
        self.next_pmid = 9_000_000
        self.revision = 0

    def first_batch(self) -> str:
        """Every paper as the first drop."""
        return self._write(list(self.papers.values()), [])

    def next_drop(self, share: float) -> str:
        """A drop revising `share` of the papers, adding half as many, deleting a tenth as many."""
        n = max(2, int(len(self.papers) * share))
        revised = self.rng.sample(sorted(self.papers), n)
        for pmid in revised:
            self.papers[pmid] = self._revised(self.papers[pmid], pmid)
        added = []
        for template in self.rng.sample(revised, max(1, n // 2)):
            self.next_pmid += 1
            pmid = str(self.next_pmid)
            self.papers[pmid] = self._revised(self.papers[template], pmid)
            added.append(pmid)
        kept = sorted(set(self.papers) - set(revised) - set(added))
        deleted = self.rng.sample(kept, max(1, n // 10))
        for pmid in deleted:
            del self.papers[pmid]
        return self._write([self.papers[p] for p in revised + added], deleted)

    def _revised(self, rows: pa.Table, pmid: str) -> pa.Table:
        """The paper's chunks with new text, hashes and vectors (a full revision)."""
        self.revision += 1
        tag = f"r{self.revision}"
        chunks = rows.drop_columns(["embedding"]).to_pylist()
        for record in chunks:
            suffix = record["chunk_id"].partition("_")[2]
            record["chunk_id"] = f"{pmid}_{suffix}" if suffix else pmid
            record["pmid"] = pmid
            record["document"] += f" revised {tag} {self.rng.choice(CODES)}"
            record["content_hash"] = f"{record['content_hash'][:24]}-{tag}"
            record["paper_hash"] = f"{pmid}-{tag}"
        matrix = np.stack(rows["embedding"].to_numpy(zero_copy_only=False)).astype(np.float32)
        matrix = matrix + np.float32(0.05) * self._noise(matrix.shape)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        return store_rows(chunks, matrix, tag, self.model_id, self.dim)

    def _noise(self, shape: tuple[int, int]) -> np.ndarray:
        return np.random.default_rng(self.rng.randrange(2**32)).normal(size=shape).astype("f4")

    def _write(self, parts: list[pa.Table], deleted: list[str]) -> str:
        key = batch_key(len(self.keys) + 1)
        batch_dir = self.batches_dir / key
        rows = pa.concat_tables(parts) if parts else None
        write_batch(batch_dir, rows)
        table = pa.table({"pmid": pa.array(sorted(deleted), pa.string())})
        pq.write_table(table.cast(DELETED_SCHEMA), batch_dir / "deleted.parquet")
        self.keys.append(key)
        return key

    def sample_words(self, count: int) -> list[str]:
        """Words of the current documents (and the revision codes): the texts the cache keeps."""
        words = set(CODES[:3])
        papers = sorted(self.papers)
        while len(words) < count:
            document = self.papers[self.rng.choice(papers)]["document"][0].as_py()
            words |= {w for w in document.split()[:12] if len(w) >= 5 and w.isalpha()}
        return sorted(words)[:count]

    def chunk_count(self) -> int:
        return sum(t.num_rows for t in self.papers.values())


def _runs(pmids: list[str]):
    """(pmid, start, length) of each run of equal pmids (a paper's chunks are adjacent)."""
    start = 0
    for i in range(1, len(pmids) + 1):
        if i == len(pmids) or pmids[i] != pmids[start]:
            yield pmids[start], start, i - start
            start = i
