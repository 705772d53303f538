"""write_embeddings: alignment, caching across runs, re-embedding changes, atomic output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.corpus.schema import embedding_schema
from candlefire_pipeline.embedding import EmbeddingCache, HashingEmbedder, write_embeddings
from candlefire_pipeline_tests.embedding.helpers import RecordingEmbedder, chunk_rows

DOCUMENTS = [
    "SPG302 in ALS\nSPG302 restores synapses",
    "TDP-43 aggregation\nTDP-43 proteinopathy is found in most ALS cases " * 3,
    "SOD1\nshort",
    "C9orf72\nHexanucleotide repeat expansion in C9orf72 causes ALS and FTD " * 2,
    "Riluzole\nRiluzole extends survival",
    "Edaravone\nEdaravone slows functional decline " * 4,
    "Tofersen\nTofersen lowers SOD1 protein",
]


@pytest.fixture
def cache(tmp_path: Path) -> EmbeddingCache:
    return EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite")


def test_rows_align_with_chunks(tmp_path, chunks_file, cache):
    chunks_path = chunks_file(DOCUMENTS)
    out = tmp_path / "embeddings.parquet"
    embedder = HashingEmbedder(dim=32)
    summary = write_embeddings(chunks_path, out, embedder, cache, read_batch=3)
    table = pq.read_table(out)
    chunks = pq.read_table(chunks_path)
    assert table.schema.equals(embedding_schema(32))
    assert table["chunk_id"].to_pylist() == chunks["chunk_id"].to_pylist()
    assert table["content_hash"].to_pylist() == chunks["content_hash"].to_pylist()
    assert set(table["model_id"].to_pylist()) == {"hashing-v1"}
    assert set(table["dim"].to_pylist()) == {32}
    vectors = np.array(table["embedding"].to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(vectors, embedder.embed(DOCUMENTS))
    assert (summary.chunks, summary.embedded, summary.cached) == (7, 7, 0)
    assert (summary.model_id, summary.dim) == ("hashing-v1", 32)
    assert not (tmp_path / "embeddings.parquet.tmp").exists()


def test_real_model_rows_align_after_length_sorting(tmp_path, chunks_file, cache, minilm):
    out = tmp_path / "embeddings.parquet"
    write_embeddings(chunks_file(DOCUMENTS), out, minilm, cache, read_batch=4)
    vectors = np.array(pq.read_table(out)["embedding"].to_pylist(), dtype=np.float32)
    one_by_one = np.vstack([minilm.embed([doc]) for doc in DOCUMENTS])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
    assert cache.count(minilm.model_id) == len(DOCUMENTS)


def test_misses_are_embedded_longest_first(tmp_path, chunks_file, cache):
    embedder = RecordingEmbedder()
    write_embeddings(chunks_file(DOCUMENTS), tmp_path / "e.parquet", embedder, cache)
    (call,) = embedder.calls
    lengths = [len(text) for text in call]
    assert lengths == sorted(lengths, reverse=True)
    assert sorted(call) == sorted(DOCUMENTS)


def test_second_run_embeds_nothing(tmp_path, chunks_file, cache):
    chunks_path = chunks_file(DOCUMENTS)
    write_embeddings(chunks_path, tmp_path / "first.parquet", HashingEmbedder(16), cache)
    embedder = RecordingEmbedder(dim=16)
    summary = write_embeddings(chunks_path, tmp_path / "second.parquet", embedder, cache)
    assert embedder.texts == []
    assert (summary.embedded, summary.cached) == (0, len(DOCUMENTS))
    assert pq.read_table(tmp_path / "second.parquet").equals(
        pq.read_table(tmp_path / "first.parquet")
    )


def test_a_changed_chunk_is_the_only_one_re_embedded(tmp_path, chunks_file, cache):
    write_embeddings(chunks_file(DOCUMENTS), tmp_path / "e.parquet", HashingEmbedder(16), cache)
    changed = DOCUMENTS.copy()
    changed[4] = "Riluzole\nRiluzole extends survival by about three months"
    embedder = RecordingEmbedder(dim=16)
    summary = write_embeddings(chunks_file(changed), tmp_path / "e.parquet", embedder, cache)
    assert embedder.texts == [changed[4]]
    assert (summary.embedded, summary.cached) == (1, len(DOCUMENTS) - 1)
    row = pq.read_table(tmp_path / "e.parquet")["embedding"][4].as_py()
    np.testing.assert_array_equal(
        np.array(row, dtype=np.float32), embedder.inner.embed_one(changed[4])
    )


def test_identical_chunks_are_embedded_once(tmp_path, chunks_file, cache):
    embedder = RecordingEmbedder()
    documents = [DOCUMENTS[0], DOCUMENTS[1], DOCUMENTS[0]]
    summary = write_embeddings(chunks_file(documents), tmp_path / "e.parquet", embedder, cache)
    assert sorted(embedder.texts) == sorted(DOCUMENTS[:2])
    assert (summary.chunks, summary.embedded, summary.cached) == (3, 2, 1)
    vectors = pq.read_table(tmp_path / "e.parquet")["embedding"].to_pylist()
    assert vectors[0] == vectors[2]


def test_empty_chunks_file_gives_an_empty_embeddings_file(tmp_path, chunks_file, cache):
    embedder = RecordingEmbedder(dim=24)
    summary = write_embeddings(chunks_file([]), tmp_path / "e.parquet", embedder, cache)
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.num_rows == 0
    assert table.schema.equals(embedding_schema(24))
    assert embedder.calls == []
    assert (summary.chunks, summary.embedded, summary.cached) == (0, 0, 0)


def test_progress_comes_at_the_interval_not_once_per_batch(tmp_path, chunks_file, cache):
    messages: list[str] = []
    summary = write_embeddings(
        chunks_file(DOCUMENTS),
        tmp_path / "e.parquet",
        HashingEmbedder(),
        cache,
        read_batch=1,
        progress=messages.append,
        progress_interval=3600,
    )
    # seven batches: the first one and the end are reported, nothing in between
    assert [m.split(" (")[0] for m in messages] == [
        "embeddings: 1/7 chunks",
        "embeddings: 7/7 chunks",
    ]
    assert summary.progress_reports == 2
    assert "chunks/s, ETA" in messages[0]


def test_progress_lines_count_done_of_total(tmp_path, chunks_file, cache):
    messages: list[str] = []
    write_embeddings(
        chunks_file(DOCUMENTS),
        tmp_path / "e.parquet",
        HashingEmbedder(),
        cache,
        read_batch=3,
        progress=messages.append,
        progress_interval=1e-9,  # every batch passes the interval
    )
    assert [m.split(" (")[0] for m in messages] == [
        "embeddings: 3/7 chunks",
        "embeddings: 6/7 chunks",
        "embeddings: 7/7 chunks",
    ]
    assert messages[-1].endswith("ETA 0 s")


def test_the_summary_names_runtime_and_model_time(tmp_path, chunks_file, cache):
    summary = write_embeddings(chunks_file(DOCUMENTS), tmp_path / "e.parquet", HashingEmbedder(),
                               cache)  # fmt: skip
    assert summary.runtime == "python"
    assert 0 < summary.model_seconds <= summary.seconds
    assert summary.chunks_per_second == pytest.approx(summary.chunks / summary.seconds)


class BrokenEmbedder(RecordingEmbedder):
    def embed(self, texts):
        raise RuntimeError("model crashed")


class ShortEmbedder(RecordingEmbedder):
    def embed(self, texts):
        return super().embed(texts)[:, :-1]


@pytest.mark.parametrize(
    ("embedder", "error"),
    [(BrokenEmbedder(), "model crashed"), (ShortEmbedder(), "expected \\(7, 16\\)")],
)
def test_a_failure_leaves_the_previous_output_untouched(
    tmp_path, chunks_file, cache, embedder, error
):
    out = tmp_path / "e.parquet"
    out.write_bytes(b"previous")
    with pytest.raises((RuntimeError, ValueError), match=error):
        write_embeddings(chunks_file(DOCUMENTS), out, embedder, cache)
    assert out.read_bytes() == b"previous"
    assert not (tmp_path / "e.parquet.tmp").exists()
    assert cache.count() == 0


def test_a_chunk_without_document_is_an_error(tmp_path, cache):
    table = chunk_rows(DOCUMENTS[:2])
    documents = table["document"].to_pylist()
    documents[1] = None
    table = table.set_column(
        table.schema.get_field_index("document"), "document", pa.array(documents, pa.string())
    )
    pq.write_table(table, tmp_path / "chunks.parquet")
    with pytest.raises(ValueError, match="000001"):
        write_embeddings(
            tmp_path / "chunks.parquet", tmp_path / "e.parquet", HashingEmbedder(), cache
        )


def _rewrite(path: Path, **columns) -> Path:
    """chunks.parquet with some columns replaced (same documents)."""
    table = pq.read_table(path)
    for name, values in columns.items():
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values))
    pq.write_table(table, path)
    return path


def test_a_metadata_or_chunker_change_with_the_same_text_embeds_nothing(
    tmp_path, chunks_file, cache
):
    # a citation update or another chunker version changes every content hash, not the text
    chunks_path = chunks_file(DOCUMENTS)
    write_embeddings(chunks_path, tmp_path / "first.parquet", HashingEmbedder(16), cache)
    _rewrite(chunks_path, content_hash=[f"new-{i}" for i in range(len(DOCUMENTS))])
    embedder = RecordingEmbedder(dim=16)
    summary = write_embeddings(chunks_path, tmp_path / "second.parquet", embedder, cache)
    assert embedder.texts == []
    assert (summary.embedded, summary.cached) == (0, len(DOCUMENTS))
    changed = [*DOCUMENTS[:-1], DOCUMENTS[-1] + " (revised)"]
    _rewrite(chunks_path, document=changed)
    write_embeddings(chunks_path, tmp_path / "third.parquet", embedder, cache)
    assert embedder.texts == [changed[-1]]


def test_a_cache_keyed_by_content_hash_is_still_used_and_moves_to_text_keys(
    tmp_path, chunks_file, cache
):
    # a cache written before text keys: rows under each chunk's content hash
    chunks_path = chunks_file(DOCUMENTS)
    legacy = pq.read_table(chunks_path)["content_hash"].to_pylist()
    vectors = HashingEmbedder(16).embed(DOCUMENTS)
    cache.put_many("hashing-v1", legacy, vectors)
    embedder = RecordingEmbedder(dim=16)
    summary = write_embeddings(chunks_path, tmp_path / "e.parquet", embedder, cache)
    assert embedder.texts == []
    assert summary.embedded == 0
    stored = np.array(pq.read_table(tmp_path / "e.parquet")["embedding"].to_pylist())
    np.testing.assert_array_equal(stored, vectors)
    from candlefire_pipeline.embedding.cache import text_key

    moved = cache.get_many("hashing-v1", [text_key(d) for d in DOCUMENTS])
    assert len(moved) == len(DOCUMENTS)


def test_a_legacy_entry_of_another_dimension_is_a_miss(tmp_path, chunks_file, cache):
    chunks_path = chunks_file(DOCUMENTS[:2])
    legacy = pq.read_table(chunks_path)["content_hash"].to_pylist()
    cache.put_many("hashing-v1", legacy, HashingEmbedder(8).embed(DOCUMENTS[:2]))
    embedder = RecordingEmbedder(dim=16)
    write_embeddings(chunks_path, tmp_path / "e.parquet", embedder, cache)
    assert sorted(embedder.texts) == sorted(DOCUMENTS[:2])
