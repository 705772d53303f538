"""A disk-backed staging of both sides of an adoption: the app's rows and the ledger's current
rows, in one SQLite file, so a comparison or an import of 250k+ rows holds one page in memory.

`app` keeps the collection's insertion order (rowid) and every row as mapped (mapping.py) with
its float32 vector as stored; `ledger` the current version of every chunk of the drops (adopted
parts excluded: those are the app's own rows), its batch, and the batches that deleted a paper.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.ledger import live_papers
from candlefire_pipeline.fsutil import is_hidden
from candlefire_pipeline.operations.adoption.mapping import extra_keys, page_rows
from candlefire_pipeline.operations.adoption.source import AdoptionError, AppCollection
from candlefire_pipeline.progress import ProgressMeter

log = logging.getLogger(__name__)

#: Batch keys of imported app rows start with this (it sorts before every drop name).
ADOPTED_PREFIX = "+app-"
READ_ROWS = 4096
SCHEMA = """
CREATE TABLE IF NOT EXISTS app (seq INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE NOT NULL,
    pmid TEXT NOT NULL, row TEXT NOT NULL, vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS app_pmid ON app (pmid);
CREATE TABLE IF NOT EXISTS ledger (chunk_id TEXT PRIMARY KEY, pmid TEXT NOT NULL,
    batch_key TEXT NOT NULL, row TEXT NOT NULL, vector BLOB NOT NULL, model_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_pmid ON ledger (pmid);
CREATE TABLE IF NOT EXISTS deleted (pmid TEXT PRIMARY KEY, batch_key TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS facts (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def is_adopted(batch_key: str) -> bool:
    return batch_key.startswith(ADOPTED_PREFIX)


class Staging:
    """The staging file of one app fingerprint (its app side is kept once complete)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + SCHEMA)

    def fact(self, name: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM facts WHERE name = ?", [name]).fetchone()
        return row[0] if row else default

    def set_fact(self, name: str, value: object) -> None:
        self.db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?)", [name, json.dumps(value)])

    # the app side ------------------------------------------------------------------------------
    def load_app(self, source: AppCollection, emit: Callable[[str], None]) -> dict:
        """Read every row of the app's collection (validated, mapped) unless already staged;
        {rows, dim, extra_keys, read_seconds}."""
        if (done := self.fact("app")) is not None:
            return json.loads(done)
        self.db.execute("DELETE FROM app")
        total = source.count()
        meter = ProgressMeter(f"reading the app's collection {source.where}", total, emit)
        dim, extras, rows = None, set(), 0
        for page in source.pages():
            chunks, vectors = page_rows(page, dim)
            dim = vectors.shape[1]
            extras.update(k for m in page.metadatas for k in extra_keys(m))
            self.db.executemany(
                "INSERT INTO app (seq, chunk_id, pmid, row, vector) VALUES (?, ?, ?, ?, ?)",
                [(page.start + i + 1, c["chunk_id"], c["pmid"], json.dumps(c), v.tobytes())
                 for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))],
            )  # fmt: skip
            rows += len(chunks)
            meter.update(rows)
        figures = meter.finish()
        if rows != total:
            raise AdoptionError(
                f"the app's collection at {source.where} changed while it was read ({total} rows "
                f"when the read began, {rows} read); run again once it is quiet"
            )
        summary = {"rows": rows, "dim": dim, "extra_keys": sorted(extras),
                   "read_seconds": figures.seconds, "count_before": total}  # fmt: skip
        self.set_fact("app", summary)
        self.db.commit()
        return summary

    def app_rows(self, after: int = 0, where: str = "", args: tuple = ()) -> Iterator[tuple]:
        """(seq, row dict, vector) in insertion order, from seq > after, in pages."""
        while True:
            page = self.db.execute(
                f"SELECT seq, row, vector FROM app WHERE seq > ? {where} ORDER BY seq LIMIT ?",
                [after, *args, READ_ROWS],
            ).fetchall()
            if not page:
                return
            for seq, row, vector in page:
                yield seq, json.loads(row), np.frombuffer(vector, dtype=np.float32)
            after = page[-1][0]

    # the ledger side ---------------------------------------------------------------------------
    def load_ledger(self, batches_dir: Path) -> dict:
        """The drops' current chunks (adopted parts left out) and their deletes, afresh."""
        self.db.execute("DELETE FROM ledger")
        self.db.execute("DELETE FROM deleted")
        keys = _drop_batches(batches_dir)
        live = live_papers(batches_dir, keys)
        wanted = {(batch, cid) for batch, chunks in live.values() for cid in chunks}
        models = set()
        for key in keys:
            models |= self._load_batch(batches_dir / key, key, wanted)
        summary = {"batches": len(keys), "chunks": len(wanted), "papers": len(live),
                   "models": sorted(models)}  # fmt: skip
        self.db.commit()
        return summary

    def _load_batch(self, batch_dir: Path, key: str, wanted: set) -> set[str]:
        deleted = batch_dir / "deleted.parquet"
        if deleted.is_file():
            pmids = pq.read_table(deleted, columns=["pmid"])["pmid"].to_pylist()
            self.db.executemany("INSERT OR REPLACE INTO deleted VALUES (?, ?)",
                                [(p, key) for p in pmids])  # fmt: skip
        embeddings = batch_dir / "embeddings.parquet"
        if not embeddings.is_file():
            return set()
        chunks = pq.ParquetFile(batch_dir / "chunks.parquet").iter_batches(batch_size=READ_ROWS)
        vectors = pq.ParquetFile(embeddings).iter_batches(
            batch_size=READ_ROWS, columns=["chunk_id", "model_id", "embedding"]
        )
        models = set()
        for rows, vecs in zip(chunks, vectors, strict=True):
            matrix = _matrix(vecs.column("embedding"))
            records = []
            for row, model, vector in zip(rows.to_pylist(), vecs.column("model_id").to_pylist(),
                                          matrix, strict=True):  # fmt: skip
                if (key, row["chunk_id"]) in wanted:
                    models.add(model)
                    records.append((row["chunk_id"], row["pmid"], key, json.dumps(row),
                                    vector.tobytes(), model))  # fmt: skip
            self.db.executemany("INSERT OR REPLACE INTO ledger VALUES (?, ?, ?, ?, ?, ?)", records)
        return models

    def close(self) -> None:
        self.db.close()

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _drop_batches(batches_dir: Path) -> list[str]:
    """The ledger's batches that came from drops (chunked), in order."""
    if not batches_dir.is_dir():
        return []
    return sorted(d.name for d in batches_dir.iterdir()
                  if (d / "chunks.parquet").is_file() and not is_hidden(d)
                  and not is_adopted(d.name))  # fmt: skip


def _matrix(column) -> np.ndarray:
    dim = column.type.list_size
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(flat, dtype=np.float32).reshape(len(column), dim)
