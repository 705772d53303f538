"""EmbeddingCache: round trip, model separation, large IN lists, two writing processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from candlefire_pipeline.embedding import EmbeddingCache
from candlefire_pipeline.settings import REPO_ROOT


def random_vectors(count: int, dim: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_round_trip_returns_the_exact_vectors(tmp_path: Path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    vectors = random_vectors(3, 8)
    cache.put_many("m", ["h1", "h2", "h3"], vectors)
    found = cache.get_many("m", ["h3", "h1", "missing"])
    assert set(found) == {"h1", "h3"}
    np.testing.assert_array_equal(found["h1"], vectors[0])
    np.testing.assert_array_equal(found["h3"], vectors[2])
    assert found["h1"].dtype == np.float32


def test_vectors_survive_reopening(tmp_path: Path):
    EmbeddingCache(tmp_path / "cache.sqlite").put_many("m", ["h"], random_vectors(1, 4))
    reopened = EmbeddingCache(tmp_path / "cache.sqlite")
    assert reopened.count() == 1
    np.testing.assert_array_equal(reopened.get_many("m", ["h"])["h"], random_vectors(1, 4)[0])


def test_models_are_kept_apart(tmp_path: Path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    small, large = random_vectors(1, 4, seed=1), random_vectors(1, 6, seed=2)
    cache.put_many("model-a", ["same-hash"], small)
    cache.put_many("model-b", ["same-hash"], large)
    cache.put_many("model-b", ["other"], large)
    np.testing.assert_array_equal(cache.get_many("model-a", ["same-hash"])["same-hash"], small[0])
    np.testing.assert_array_equal(cache.get_many("model-b", ["same-hash"])["same-hash"], large[0])
    assert cache.get_many("model-a", ["other"]) == {}
    assert (cache.count("model-a"), cache.count("model-b"), cache.count()) == (1, 2, 3)


def test_put_replaces_an_existing_vector(tmp_path: Path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    cache.put_many("m", ["h"], random_vectors(1, 4, seed=1))
    cache.put_many("m", ["h"], random_vectors(1, 4, seed=2))
    assert cache.count() == 1
    np.testing.assert_array_equal(cache.get_many("m", ["h"])["h"], random_vectors(1, 4, seed=2)[0])


def test_lookups_beyond_the_sqlite_variable_limit(tmp_path: Path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    hashes = [f"h{i}" for i in range(2500)]
    vectors = random_vectors(len(hashes), 4)
    cache.put_many("m", hashes, vectors)
    found = cache.get_many("m", hashes + ["absent"])
    assert len(found) == len(hashes)
    np.testing.assert_array_equal(found["h2499"], vectors[2499])


def test_put_rejects_a_count_mismatch(tmp_path: Path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    with pytest.raises(ValueError, match="one vector per hash"):
        cache.put_many("m", ["h1", "h2"], random_vectors(3, 4))
    assert cache.count() == 0


def write_rows(path: str, worker: int, rows: int) -> None:
    """Child process: many small transactions, interleaving with the other writer."""
    cache = EmbeddingCache(Path(path))
    for start in range(0, rows, 10):
        hashes = [f"w{worker}-{i}" for i in range(start, start + 10)]
        cache.put_many("m", hashes, random_vectors(10, 8, seed=worker * 1000 + start))


def test_two_processes_write_concurrently(tmp_path: Path):
    path = str(tmp_path / "cache.sqlite")
    code = (
        "import sys; from candlefire_pipeline_tests.embedding.test_cache import write_rows;"
        "write_rows(sys.argv[1], int(sys.argv[2]), 300)"
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", code, path, str(w)], cwd=REPO_ROOT) for w in (1, 2)
    ]
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0]
    cache = EmbeddingCache(Path(path))
    assert cache.count("m") == 600
    np.testing.assert_array_equal(
        cache.get_many("m", ["w2-290"])["w2-290"], random_vectors(10, 8, seed=2290)[0]
    )
