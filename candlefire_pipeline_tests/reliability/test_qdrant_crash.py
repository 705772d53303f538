"""Fault: Qdrant has no transactions; a crash at ANY write of an apply converges on the next one.

The batch changes every kind of paper at once (full text arrives: bare chunk -> 3 sections;
sections shrink; a new paper; an unchanged one; a delete) and is applied through the real
apply_batch. A fault is injected before each write call in turn (as if the process died right
after the previous one), the store is reopened like a restarted process, and the NEXT batch is
applied: it finishes the cut one first (intent marker, exact paper_chunks comparison). A real
SIGKILL in the middle of an upsert completes the picture.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.qdrant import backend as qdrant
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, DELETED_SCHEMA, embedding_schema
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.reliability.helpers import paper_rows, wait_for

DIM = 16


def write_batch(batches: Path, key: str, rows: pa.Table, deleted: list[str] = ()) -> None:
    """The parquet files apply_batch reads, for store rows made by the test."""
    out = batches / key
    out.mkdir(parents=True)
    pq.write_table(rows.select(CHUNK_SCHEMA.names).cast(CHUNK_SCHEMA), out / "chunks.parquet")
    n = rows.num_rows
    embeddings = pa.table(
        [rows["chunk_id"], rows["content_hash"], rows["model_id"],
         pa.array([DIM] * n, pa.int32()), rows["embedding"]],
        schema=embedding_schema(DIM),
    )  # fmt: skip
    pq.write_table(embeddings, out / "embeddings.parquet")
    pq.write_table(
        pa.table({"pmid": list(deleted)}, schema=DELETED_SCHEMA), out / "deleted.parquet"
    )


def two_batches(batches: Path) -> None:
    v1 = pa.concat_tables(
        [paper_rows(["1", "2", "9"], "v1", dim=DIM), paper_rows(["3", "4"], "v1", 3, dim=DIM)]
    )
    v2 = pa.concat_tables(
        [
            paper_rows(["1", "5"], "v2", 3, dim=DIM),  # 1 gains full text; 5 is new
            paper_rows(["3"], "v2", 1, dim=DIM),  # 3 drops to one chunk
            paper_rows(["4"], "v1", 3, dim=DIM),  # 4 unchanged
        ]
    )
    write_batch(batches, "b1", v1)
    write_batch(batches, "b2", v2, deleted=["9"])
    write_batch(batches, "b3", paper_rows(["7"], "v3", dim=DIM))  # an unrelated later batch


class Crash(RuntimeError):
    """Stands for the process dying before a write call."""


class CrashBefore:
    """The client, except that write call number `at` (1-based) raises instead of writing."""

    def __init__(self, client, at: int) -> None:
        self._client, self.at, self.writes = client, at, 0

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if name not in ("upsert", "delete"):
            return attr

        def write(*args, **kwargs):
            self.writes += 1
            if self.writes == self.at:
                raise Crash(f"crash before write {self.at}")
            return attr(*args, **kwargs)

        return write


def apply(path: Path, batches: Path, key: str, crash_at: int | None = None):
    """apply_batch in a fresh backend (a restarted process): (write calls, batches resumed)."""
    store = build_backend("qdrant", path=path)
    faulty = CrashBefore(store._client, crash_at or 0)
    store._client = faulty
    try:
        summary = apply_batch(store, batches, key, "test", DIM)
    finally:
        store.close()
    return faulty.writes, summary.resumed


def holdings(path: Path) -> tuple[dict, dict]:
    store = build_backend("qdrant", path=path)
    try:
        return store.chunk_hashes(), store.paper_hashes()
    finally:
        store.close()


def test_a_crash_before_any_write_converges_on_the_next_apply(tmp_path, monkeypatch):
    monkeypatch.setattr(qdrant, "UPSERT_BATCH", 2)  # many write calls: many crash points
    monkeypatch.setattr(qdrant, "ID_BATCH", 1)
    template = tmp_path / "template"
    two_batches(template)
    final_papers = {"1": "v2-1", "3": "v2-3", "4": "v1-4", "5": "v2-5", "2": "v1-2", "7": "v3-7"}

    clean_batches = tmp_path / "clean_batches"
    shutil.copytree(template, clean_batches)
    clean = tmp_path / "clean"
    for key in ("b1", "b2", "b3"):
        writes, _ = apply(clean, clean_batches, key)
        if key == "b2":
            b2_writes = writes
    expected = expected_chunks(clean_batches)
    assert b2_writes >= 8 and holdings(clean) == (expected, final_papers)

    for at in range(1, b2_writes + 1):
        batches, path = tmp_path / f"batches{at}", tmp_path / f"crash{at}"
        shutil.copytree(template, batches)
        apply(path, batches, "b1")
        with pytest.raises(Crash):
            apply(path, batches, "b2", crash_at=at)
        assert holdings(path)[0] != expected_chunks(batches, ["b1", "b2"]), at  # cut midway
        assert StoreLedger(batches, "qdrant").interrupted() == ["b2"], at
        _, resumed = apply(path, batches, "b3")  # the next batch finishes the cut one first
        assert resumed == ("b2",), at
        assert holdings(path) == (expected, final_papers), at
        assert StoreLedger(batches, "qdrant").interrupted() == [], at


WRITER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from candlefire_pipeline.backends.factory import build_backend\n"
    "from candlefire_pipeline.operations.indexing import apply_batch\n"
    "store = build_backend('qdrant', path=sys.argv[1])\n"
    "apply_batch(store, Path(sys.argv[2]), 'b2', 'test', 16)\n"
    "print('finished', flush=True)\n"
)


def test_sigkill_in_the_middle_of_an_upsert_converges(tmp_path):
    batches, path = tmp_path / "batches", tmp_path / "store"
    pmids = [str(n) for n in range(1000, 1600)]
    v1, v2 = paper_rows(pmids, "v1", dim=DIM), paper_rows(pmids, "v2", 3, dim=DIM)
    write_batch(batches, "b1", v1)
    write_batch(batches, "b2", v2)
    apply(path, batches, "b1")
    db = path / "collection" / "candlefire_chunks" / "storage.sqlite"

    def rows_on_disk() -> int:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
            return conn.execute("SELECT count(*) FROM points").fetchone()[0]

    log = tmp_path / "writer.log"
    proc = procs.spawn([sys.executable, "-c", WRITER, path, batches], log_path=log)
    try:
        # v2's chunk ids are new: the count grows from 600 as the upsert goes
        wait_for(lambda: rows_on_disk() > len(pmids) + 200, "half the upsert",
                 alive=lambda: proc.poll() is None)  # fmt: skip
    finally:
        procs.stop_group(proc, first=signal.SIGKILL)
    assert "finished" not in log.read_text()

    chunks, _ = holdings(path)  # the killed process left a store that opens
    assert len(pmids) < len(chunks) < v1.num_rows + v2.num_rows
    store = build_backend("qdrant", path=path)
    mixed = [p for p, held in store.paper_chunks().items() if p in held and f"{p}_s0" in held]
    store.close()
    assert mixed  # papers holding old and new chunks side by side: what the next apply rewrites
    assert StoreLedger(batches, "qdrant").interrupted() == ["b2"]
    apply(path, batches, "b2")
    assert holdings(path) == (expected_chunks(batches), {p: f"v2-{p}" for p in pmids})
