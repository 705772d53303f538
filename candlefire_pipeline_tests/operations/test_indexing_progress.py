"""Store loads of more than PROGRESS_MIN_ROWS rows report progress, on every backend."""

import json
from pathlib import Path

import pytest

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.embedding import EmbeddingCache, load_embedder, write_embeddings
from candlefire_pipeline.operations.indexing import PROGRESS_MIN_ROWS, apply_batch

BIG, SMALL = "0001-big.jsonl", "0002-small.jsonl"
BIG_PAPERS = PROGRESS_MIN_ROWS + 1_500  # abstract-only: one chunk per paper


def _batch(root: Path, key: str, pmids: range) -> None:
    drop = root / "drops" / key
    drop.parent.mkdir(parents=True, exist_ok=True)
    records = [{"pmid": str(p), "title": f"t{p}", "abstract": f"SOD1 note {p}."} for p in pmids]
    drop.write_text("".join(json.dumps(r) + "\n" for r in records))
    batch_dir = root / "batches" / key
    write_papers(drop, batch_dir)
    write_chunks(batch_dir)
    embedder = load_embedder("hashing-v1")
    cache = EmbeddingCache(root / "cache.sqlite")
    write_embeddings(
        batch_dir / "chunks.parquet", batch_dir / "embeddings.parquet", embedder, cache
    )


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("progress")
    _batch(root, BIG, range(1, BIG_PAPERS + 1))
    _batch(root, SMALL, range(BIG_PAPERS + 1, BIG_PAPERS + 11))
    return root / "batches"


def test_a_big_load_reports_done_total_rate_and_eta_then_the_end(backend, batches):
    embedder, messages = load_embedder("hashing-v1"), []
    summary = apply_batch(
        backend, batches, BIG, embedder.model_id, embedder.dim, record_applied=False,
        progress=messages.append,
    )  # fmt: skip
    assert summary.rows_written == BIG_PAPERS
    assert messages, "no progress reported"
    assert all(m.startswith(f"{backend.name} load: ") and "rows/s, ETA" in m for m in messages)
    assert f"{BIG_PAPERS}/{BIG_PAPERS} rows (100%)" in messages[-1]
    done = [int(m.split(": ")[1].split("/")[0]) for m in messages]
    assert done == sorted(done)


def test_a_small_load_stays_quiet(backend, batches):
    embedder, messages = load_embedder("hashing-v1"), []
    summary = apply_batch(
        backend, batches, SMALL, embedder.model_id, embedder.dim, record_applied=False,
        progress=messages.append,
    )  # fmt: skip
    assert summary.rows_written == 10 and messages == []


def test_replace_papers_hands_over_a_running_count(backend, batches):
    from candlefire_pipeline.operations.indexing import read_store_rows

    rows = read_store_rows(batches / BIG, BIG)
    counts = []
    assert backend.replace_papers(rows, progress=counts.append) == rows.num_rows
    assert counts and counts[-1] == rows.num_rows and counts == sorted(counts)
    if backend.name != "memory":
        assert len(counts) >= 2  # COPY slices / Chroma upsert batches, not one call at the end
