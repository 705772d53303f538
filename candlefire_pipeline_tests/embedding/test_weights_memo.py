"""The weights' hash is read from its record while the model's files are unchanged, made again
when one changed (even to the same size and mtime), and never recorded for files that changed
in the same moment; an existing export is used without hashing the original weights."""

from __future__ import annotations

import os
import time

import pytest

from candlefire_pipeline.embedding import model_files, weights_memo
from candlefire_pipeline.embedding.onnx_artifacts import ensure_onnx_model
from candlefire_pipeline.embedding.weights_memo import known_weights_hash
from candlefire_pipeline.parity.conformance.fixtures import FIXTURE_MODEL_ID


class Hashes:
    """model_files.weights_hash, counted (and refused when `allowed` is False)."""

    def __init__(self, monkeypatch) -> None:
        self.made, self.allowed, self._real = 0, True, model_files.weights_hash
        monkeypatch.setattr(model_files, "weights_hash", self)

    def __call__(self, folder):
        assert self.allowed, f"the weights in {folder} were hashed again"
        self.made += 1
        return self._real(folder)


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights-one" * 1000)
    (folder / "config.json").write_text('{"dim": 8}')
    (folder / "1_Pooling" / "config.json").write_text("{}")
    return folder


@pytest.fixture
def settled(monkeypatch):
    """Files older than RACY_S may be trusted; a short RACY_S keeps the test short."""
    monkeypatch.setattr(weights_memo, "RACY_S", 0.2)
    time.sleep(0.3)


def test_unchanged_weights_are_hashed_once(model, tmp_path, monkeypatch, settled):
    hashes = Hashes(monkeypatch)
    first = known_weights_hash(model, tmp_path / "cache")
    hashes.allowed = False
    assert known_weights_hash(model, tmp_path / "cache") == first == hashes._real(model)
    assert hashes.made == 1


@pytest.mark.parametrize("change", ["same size and mtime", "a file added", "a file renamed"])
def test_a_changed_file_is_hashed_again(model, tmp_path, monkeypatch, settled, change):
    hashes = Hashes(monkeypatch)
    first = known_weights_hash(model, tmp_path / "cache")
    weights = model / "model.safetensors"
    if change == "same size and mtime":  # what `cp -p` or `rsync -t` of other weights leaves
        st = weights.stat()
        weights.write_bytes(b"weights-two" * 1000)
        os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    elif change == "a file added":
        (model / "extra.bin").write_bytes(b"x")
    else:
        weights.rename(model / "pytorch_model.bin")
    again = known_weights_hash(model, tmp_path / "cache")
    assert hashes.made == 2 and again == hashes._real(model) != first


def test_files_changed_a_moment_ago_are_not_recorded(model, tmp_path, monkeypatch):
    hashes = Hashes(monkeypatch)  # RACY_S as shipped: the files were written just now
    for _ in range(2):
        assert known_weights_hash(model, tmp_path / "cache") == hashes._real(model)
    assert hashes.made == 2
    assert not (tmp_path / "cache" / weights_memo.RECORDS).exists()


def test_a_broken_record_is_ignored(model, tmp_path, monkeypatch, settled):
    hashes = Hashes(monkeypatch)
    first = known_weights_hash(model, tmp_path / "cache")
    for record in (tmp_path / "cache" / weights_memo.RECORDS).iterdir():
        record.write_text('{"format": 1, "fol')
    assert known_weights_hash(model, tmp_path / "cache") == first and hashes.made == 2


def test_an_existing_export_is_used_without_hashing_the_weights(onnx_dir, monkeypatch):
    exported = ensure_onnx_model(FIXTURE_MODEL_ID, "fp32", onnx_dir)  # records the hash
    hashes = Hashes(monkeypatch)
    hashes.allowed = False  # the packaged model's files were installed long ago
    again = ensure_onnx_model(FIXTURE_MODEL_ID, "fp32", onnx_dir)
    assert again.path == exported.path and not again.exported and hashes.made == 0
