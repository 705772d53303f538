"""A generation's batch files: linked drop facts, its own chunks, its ledger and its lag."""

from __future__ import annotations

import os
import time

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus import chunking
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.embedding import EmbeddingCache, HashingEmbedder
from candlefire_pipeline.generations.batches import behind, embed_batch, prepare_chunks
from candlefire_pipeline.generations.identity import Generation, Identity, IndexLayout
from candlefire_pipeline.generations.view import batches_dir, generation_settings, targets
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.operations.batches import paper, write_batch

DIM32 = HashingEmbedder(dim=32, model_id="hashing-v1:32")


def generation(name="dim32", chunker="cf-1", dim=32, default=False) -> Generation:
    identity = Identity(f"hashing-v1:{dim}", dim, chunker, IndexLayout("halfvec"))
    return Generation(name, identity, f"hashing-v1:{dim}", "onnx", default=default)


@pytest.fixture
def settings(tmp_path) -> Settings:
    settings = Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "data" / "drops")
    write_batch(settings.batches_dir, "b1", [paper("1"), paper("2", sections=2)])
    write_batch(settings.batches_dir, "b2", [paper("1", "v2"), paper("3")], deletes=["2"])
    return settings


def test_the_view_names_its_own_targets_and_ledger_and_the_default_keeps_todays(settings):
    gen = generation()
    view = generation_settings(settings, gen)
    assert (view.pg_table, view.chroma_collection, view.qdrant_collection) == (
        f"chunks_{gen.gid}", f"candlefire_chunks_{gen.gid}", f"candlefire_chunks_{gen.gid}",
    )  # fmt: skip
    assert view.batches_dir == settings.data_dir / "generations" / gen.gid / "batches"
    assert (view.model_id, view.pg_ann.vector_type) == ("hashing-v1:32", "halfvec")
    default = generation("default", dim=16, default=True)
    assert targets(settings, default) == {
        "pgvector": "chunks", "chroma": "candlefire_chunks", "qdrant": "candlefire_chunks",
    }  # fmt: skip
    assert generation_settings(settings, default).batches_dir == settings.batches_dir


def test_same_chunker_links_the_drop_files_and_embeds_with_its_own_model(settings):
    gen = generation()
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    summary = embed_batch(settings, gen, "b1", DIM32, cache)
    out = batches_dir(settings, gen) / "b1"
    for name in ("papers.parquet", "deleted.parquet", "chunks.parquet"):
        assert os.path.samefile(out / name, settings.batches_dir / "b1" / name)
    embeddings = pq.read_table(out / "embeddings.parquet")
    assert embeddings.schema.field("embedding").type.list_size == 32
    assert set(embeddings["model_id"].to_pylist()) == {"hashing-v1:32"}
    assert (summary.embedded, summary.dim) == (summary.chunks, 32)
    # the default generation's own embeddings are untouched
    default = pq.read_table(settings.batches_dir / "b1" / "embeddings.parquet")
    assert default.schema.field("embedding").type.list_size == 16


def test_a_resent_drop_is_linked_again(settings):
    gen = generation()
    prepare_chunks(settings, gen, "b1")
    write_batch(settings.batches_dir, "b1", [paper("1", "v3")])  # new files (new inodes)
    out, _ = prepare_chunks(settings, gen, "b1")
    assert os.path.samefile(out / "papers.parquet", settings.batches_dir / "b1" / "papers.parquet")
    assert "v3 title of 1" in str(pq.read_table(out / "chunks.parquet")["document"].to_pylist())


def test_another_chunker_writes_the_generations_own_chunks(settings, monkeypatch):
    def first_section_only(record):
        return chunking.chunk_paper(record)[:1]

    monkeypatch.setitem(chunking.CHUNKERS, "test-1section", first_section_only)
    gen = generation(chunker="test-1section")
    with pytest.raises(FileNotFoundError, match="materialize the generation's chunks first"):
        embed_batch(settings, gen, "b1", DIM32, EmbeddingCache(settings.cache_dir / "c.sqlite"))
    out, summary = prepare_chunks(settings, gen, "b1")
    assert not os.path.samefile(
        out / "chunks.parquet", settings.batches_dir / "b1" / "chunks.parquet"
    )
    ids = pq.read_table(out / "chunks.parquet")["chunk_id"].to_pylist()
    assert sorted(ids) == ["1", "2_s0"] and summary.chunks == 2


def test_an_unknown_chunker_or_a_drop_never_ingested_is_a_clear_error(settings):
    with pytest.raises(ValueError, match="unknown chunker version 'cf-9'"):
        prepare_chunks(settings, generation(chunker="cf-9"), "b1")
    with pytest.raises(FileNotFoundError, match="has not been ingested"):
        prepare_chunks(settings, generation(), "b9")


def test_the_lag_is_what_its_own_ledger_lacks(settings):
    gen = generation()
    from candlefire_pipeline.backends.memory import MemoryBackend

    assert behind(settings, gen, ["memory"]) == {"memory": ["b1", "b2"]}
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    store = MemoryBackend()
    for key in ("b1", "b2"):
        embed_batch(settings, gen, key, DIM32, cache)
        apply_batch(store, batches_dir(settings, gen), key, DIM32.model_id, 32)
    assert behind(settings, gen, ["memory"]) == {"memory": []}
    # the default generation's ledger (data/batches) is not the generation's
    assert behind(settings, generation("default", dim=16, default=True), ["memory"]) == {
        "memory": ["b1", "b2"]
    }
    assert store.chunk_hashes() == expected_chunks(batches_dir(settings, gen))
    resent = write_batch(settings.batches_dir, "b2", [paper("3", "v2")])  # the drop is sent again
    # dated after the apply explicitly: a file's mtime comes from a coarser clock than the
    # ledger's time.time(), so a rewrite right after the apply may carry an earlier time
    os.utime(resent / "papers.parquet", ns=(time.time_ns() + 10**9,) * 2)
    assert behind(settings, gen, ["memory"]) == {"memory": ["b2"]}
