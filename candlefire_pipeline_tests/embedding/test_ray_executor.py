"""The embedding stage on a real local Ray cluster: same vectors, same order, same cache rules."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.embedding import EmbeddingCache, write_embeddings
from candlefire_pipeline.embedding.ray_executor import (
    RayEmbedder,
    RayEmbeddingError,
    RayUnavailableError,
)
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, RaySettings

#: Texts of very different lengths, so the stage's longest-first order differs from input order.
TOPICS = ["SOD1", "TDP-43 aggregates", "C9orf72 repeat expansions", "SPG302 in ALS", "riluzole"]
#: Each test's actors take half a CPU: the shared real-model pair plus another pair fit on 2 CPUs.
HALF_CPU = 0.5


def documents(n: int, salt: str = "") -> list[str]:
    return [
        f"{TOPICS[i % len(TOPICS)]} study {salt}{i}\n" + "motor neuron degeneration " * (i % 13 + 1)
        for i in range(n)
    ]


def ray_settings(cluster, **overrides) -> RaySettings:
    values = {"address": cluster.address, "actors": 2, "cpus_per_actor": HALF_CPU}
    return RaySettings(**{**values, **overrides})


@pytest.fixture(scope="module")
def ray_minilm(ray_cluster):
    """Two actors with the real packaged all-MiniLM-L6-v2, shared by this module's tests."""
    settings = ray_settings(ray_cluster, slice_texts=8)
    with RayEmbedder({"model_id": DEFAULT_MODEL_ID}, settings) as embedder:
        yield embedder


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    table = pq.read_table(path)
    vectors = np.asarray(table["embedding"].combine_chunks().flatten()).reshape(table.num_rows, -1)
    return table["chunk_id"].to_pylist(), vectors


def test_ray_vectors_equal_in_process_vectors_in_order(ray_minilm, minilm, tmp_path, chunks_file):
    assert (ray_minilm.model_id, ray_minilm.dim) == (minilm.model_id, minilm.dim) == (
        "sentence-transformers/all-MiniLM-L6-v2", 384,
    )  # fmt: skip
    texts = documents(50)
    direct = ray_minilm.embed(texts)
    assert direct.dtype == np.float32 and direct.shape == (50, 384)
    assert np.abs(direct - minilm.embed(texts)).max() < 1e-5

    chunks = chunks_file(texts)
    outputs = {}
    for name, embedder in (("ray", ray_minilm), ("local", minilm)):
        cache = EmbeddingCache(tmp_path / f"{name}.sqlite")
        summary = write_embeddings(chunks, tmp_path / f"{name}.parquet", embedder, cache)
        assert (summary.embedded, summary.model_id) == (50, minilm.model_id)
        outputs[name] = read_embeddings(tmp_path / f"{name}.parquet")
    chunk_ids = pq.read_table(chunks)["chunk_id"].to_pylist()
    assert outputs["ray"][0] == outputs["local"][0] == chunk_ids
    diff = np.abs(outputs["ray"][1] - outputs["local"][1]).max()
    assert diff < 1e-5, f"Ray vs in-process max abs diff {diff}"


def test_an_actor_killed_mid_batch_is_retried_without_lost_or_duplicated_rows(
    ray_minilm, minilm, tmp_path, chunks_file
):
    texts = documents(120, salt="kill")
    chunks = chunks_file(texts)
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    victim = ray_minilm.actor_pids()[0]
    slices_before, total_slices = ray_minilm.slices_done, -(-len(texts) // 8)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["summary"] = write_embeddings(chunks, tmp_path / "e.parquet", ray_minilm, cache)
        except BaseException as exc:  # reported by the assertion below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 600
    while ray_minilm.slices_done == slices_before and time.monotonic() < deadline:
        time.sleep(0.02)
    done_at_kill = ray_minilm.slices_done - slices_before
    os.kill(victim, signal.SIGKILL)
    worker.join(timeout=900)
    assert not worker.is_alive() and "error" not in outcome, outcome.get("error")
    assert 1 <= done_at_kill < total_slices, "the kill must land while the batch is running"

    summary = outcome["summary"]
    assert (summary.chunks, summary.embedded, summary.cached) == (120, 120, 0)
    chunk_ids, vectors = read_embeddings(tmp_path / "e.parquet")
    assert chunk_ids == pq.read_table(chunks)["chunk_id"].to_pylist()
    assert len(set(chunk_ids)) == 120
    assert np.abs(vectors - minilm.embed(texts)).max() < 1e-5
    assert cache.count(minilm.model_id) == 120
    assert victim not in ray_minilm.actor_pids()  # Ray restarted the killed actor


def test_a_fully_cached_partition_sends_nothing_to_ray(ray_minilm, tmp_path, chunks_file):
    chunks = chunks_file(documents(20, salt="cached"))
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    first = write_embeddings(chunks, tmp_path / "first.parquet", ray_minilm, cache)
    assert first.embedded == 20
    tasks, calls = ray_minilm.tasks_sent, sum(s["calls"] for s in ray_minilm.stats())

    again = write_embeddings(chunks, tmp_path / "again.parquet", ray_minilm, cache)

    assert (again.embedded, again.cached) == (0, 20)
    assert ray_minilm.tasks_sent == tasks
    assert sum(s["calls"] for s in ray_minilm.stats()) == calls
    assert (
        read_embeddings(tmp_path / "again.parquet")[0]
        == read_embeddings(tmp_path / "first.parquet")[0]
    )


def test_an_empty_list_is_answered_without_a_task(ray_minilm):
    tasks = ray_minilm.tasks_sent
    assert ray_minilm.embed([]).shape == (0, 384)
    assert ray_minilm.tasks_sent == tasks


def test_actors_dead_for_good_fail_the_stage_and_write_nothing(ray_cluster, tmp_path, chunks_file):
    chunks = chunks_file(documents(30, salt="dead"))
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    settings = ray_settings(ray_cluster, max_retries=0, slice_texts=4)
    with RayEmbedder({"model_id": "hashing-v1:16"}, settings) as embedder:
        for pid in embedder.actor_pids():
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(RayEmbeddingError, match=ray_cluster.address):
            write_embeddings(chunks, tmp_path / "e.parquet", embedder, cache)
    assert not (tmp_path / "e.parquet").exists()
    assert not list(tmp_path.glob("*.tmp"))
    assert cache.count() == 0


def test_workers_with_another_model_identity_are_refused(ray_cluster):
    settings = ray_settings(ray_cluster, actors=1)
    with pytest.raises(RayEmbeddingError, match="hashing-v1:8"):
        RayEmbedder({"model_id": "hashing-v1:8"}, settings, expected_model_id="hashing-v1:16")


def test_actors_the_cluster_cannot_place_time_out_with_the_resources(ray_cluster):
    settings = ray_settings(ray_cluster, actors=1, cpus_per_actor=64, startup_timeout_s=3)
    with pytest.raises(RayUnavailableError, match="did not start within 3 s"):
        RayEmbedder({"model_id": "hashing-v1:16"}, settings)
