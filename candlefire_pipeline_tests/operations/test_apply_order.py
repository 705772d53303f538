"""Batches applied to a store in any order: after every apply the store holds exactly the ledger's
view of the batches it has applied, and the end state is the in-order one."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus.drops import write_chunks, write_papers
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.embedding import EmbeddingCache, HashingEmbedder, write_embeddings
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline_tests.defs.many_drops import write_many_drops

EMBEDDER = HashingEmbedder(dim=16)


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> tuple[Path, list[str]]:
    """Ten overlapping drops taken through papers, chunks and embeddings (no store yet)."""
    root = tmp_path_factory.mktemp("order")
    keys = write_many_drops(root / "drops", count=10)
    cache = EmbeddingCache(root / "cache.sqlite")
    for key in keys:
        batch = root / "batches" / key
        write_papers(root / "drops" / key, batch)
        write_chunks(batch)
        write_embeddings(batch / "chunks.parquet", batch / "embeddings.parquet", EMBEDDER, cache)
    return root / "batches", keys


def pmids(batches_dir: Path, key: str) -> set[str]:
    return set(pq.read_table(batches_dir / key / "papers.parquet")["pmid"].to_pylist())


def orders(keys: list[str]) -> dict[str, list[str]]:
    shuffled = keys[:]
    random.Random(7).shuffle(shuffled)
    middle_out = keys[len(keys) // 2 :] + keys[: len(keys) // 2]
    return {"reverse": keys[::-1], "shuffled": shuffled, "newer half first": middle_out}


def fresh_copy(batches: Path, tmp_path: Path) -> Path:
    """The batch files without any store's applied markers (each order starts from nothing)."""
    target = tmp_path / "batches"
    shutil.copytree(batches, target, ignore=shutil.ignore_patterns("applied-*.json"))
    return target


@pytest.mark.parametrize("order", ["reverse", "shuffled", "newer half first"])
def test_any_apply_order_keeps_the_store_equal_to_the_ledger(backend, batches, tmp_path, order):
    source, keys = batches
    batches_dir = fresh_copy(source, tmp_path)
    sequence = orders(keys)[order]
    assert sequence != keys
    applied: list[str] = []
    for key in sequence:
        apply_batch(backend, batches_dir, key, EMBEDDER.model_id, EMBEDDER.dim)
        applied.append(key)
        assert backend.chunk_hashes() == expected_chunks(batches_dir, applied), (order, applied)
    assert backend.chunk_hashes() == expected_chunks(batches_dir)


def test_in_order_end_state_is_the_reference(make_backend, batches, tmp_path):
    """Guards the fixture: order matters for these drops (updates, upgrades and deletes)."""
    source, keys = batches
    store = make_backend("memory")
    batches_dir = fresh_copy(source, tmp_path)
    for key in keys:
        apply_batch(store, batches_dir, key, EMBEDDER.model_id, EMBEDDER.dim)
    final = store.chunk_hashes()
    assert final == expected_chunks(batches_dir)
    naive: dict[str, str] = {}  # last writer wins by arrival, no ledger: what reverse would give
    for key in keys[::-1]:
        naive.update(expected_chunks(batches_dir, [key]))
    assert naive != final


def test_a_later_batch_that_never_reaches_the_store_holds_nothing_back(backend, batches, tmp_path):
    source, keys = batches
    batches_dir = fresh_copy(source, tmp_path)
    stalled = keys[1]  # its papers.parquet exists, but its run failed before the store step
    applied = [keys[0], *keys[2:4]]
    for key in applied:
        apply_batch(backend, batches_dir, key, EMBEDDER.model_id, EMBEDDER.dim)
    expected = expected_chunks(batches_dir, applied)
    assert backend.chunk_hashes() == expected
    # the scenario matters: the stalled batch re-sends papers of the first that nothing later
    # touches, so the old rule (skip what a later papers.parquet holds) would have lost them
    later = set().union(*(pmids(batches_dir, k) for k in [stalled, *keys[2:4]]))
    shared = pmids(batches_dir, keys[0]) & pmids(batches_dir, stalled)
    assert shared - set().union(*(pmids(batches_dir, k) for k in keys[2:4])), later
    stored_pmids = {cid.split("_")[0] for cid in backend.chunk_hashes()}
    assert shared <= stored_pmids

    apply_batch(backend, batches_dir, stalled, EMBEDDER.model_id, EMBEDDER.dim)
    assert backend.chunk_hashes() == expected_chunks(batches_dir, [*applied, stalled])
