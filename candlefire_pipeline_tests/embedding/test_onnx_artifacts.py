"""The exported-ONNX cache: exported once, verified on every load, safe under concurrency."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from candlefire_pipeline.embedding.model_files import model_dir, weights_hash
from candlefire_pipeline.embedding.onnx_artifacts import (
    MANIFEST_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    OnnxExportError,
    check_artifact,
    ensure_onnx_model,
    file_sha256,
)
from candlefire_pipeline.embedding.onnx_export import check_fp32_agreement
from candlefire_pipeline.embedding.weights_memo import RECORDS


@pytest.fixture(scope="module")
def exported(mpnet_768, onnx_dir):
    """The session's verified fp32 export of the 768-dim model."""
    return ensure_onnx_model(str(mpnet_768), "fp32", onnx_dir)


def _truncate(folder: Path) -> None:
    path = folder / MODEL_FILE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_byte(folder: Path) -> None:
    path = folder / MODEL_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _drop_manifest(folder: Path) -> None:
    (folder / MANIFEST_FILE).unlink()


def _drop_tokenizer(folder: Path) -> None:
    (folder / TOKENIZER_FILE).unlink()


def _other_weights(folder: Path) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["source_hash"] = "0" * 64
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def _garbled_manifest(folder: Path) -> None:
    (folder / MANIFEST_FILE).write_text('{"format": 1, "varia')


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_truncate, "bytes"),
        (_flip_a_byte, "SHA-256"),
        (_drop_manifest, "manifest"),
        (_garbled_manifest, "manifest"),
        (_drop_tokenizer, "tokenizer.json is missing"),
        (_other_weights, "source_hash"),
    ],
)
def test_a_damaged_export_is_detected(exported, tmp_path, damage, reason):
    copy = tmp_path / exported.path.name
    shutil.copytree(exported.path, copy)
    source_hash = exported.manifest["source_hash"]
    assert check_artifact(copy, source_hash, "fp32")["onnx_sha256"] == file_sha256(
        copy / MODEL_FILE
    )
    damage(copy)
    with pytest.raises(ValueError, match=reason):
        check_artifact(copy, source_hash, "fp32")


def test_the_export_is_cached(exported, mpnet_768, onnx_dir):
    again = ensure_onnx_model(str(mpnet_768), "fp32", onnx_dir)
    assert not again.exported
    assert again.path == exported.path
    assert again.manifest == exported.manifest
    assert exported.path.name.startswith("mpnet-768-")


def test_two_exporters_meeting_a_partial_export_reexport_it_once(exported, mpnet_768, tmp_path):
    """A truncated export and a crashed exporter's temp folder; two processes need the model."""
    onnx_dir = tmp_path / "onnx"
    shutil.copytree(exported.path, onnx_dir / exported.path.name)
    _truncate(onnx_dir / exported.path.name)
    crashed = onnx_dir / f".tmp-{exported.path.name}-deadbeef"
    crashed.mkdir()
    (crashed / MODEL_FILE).write_bytes(b"half a model")
    code = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from candlefire_pipeline.embedding.onnx_artifacts import ensure_onnx_model
        art = ensure_onnx_model({str(mpnet_768)!r}, "fp32", Path({str(onnx_dir)!r}))
        print(json.dumps({{"exported": art.exported, "path": str(art.path),
                           "sha": art.manifest["onnx_sha256"]}}))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        assert proc.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["exported"] for r in results) == [False, True]  # one export, one wait
    folder = onnx_dir / exported.path.name
    assert {(r["path"], r["sha"]) for r in results} == {
        (str(folder), file_sha256(folder / MODEL_FILE))
    }
    check_artifact(Path(results[0]["path"]), weights_hash(model_dir(str(mpnet_768))), "fp32")
    # no temp folder left: the export, its lock and the weights' hash record (weights_memo.py)
    kept = {p.name for p in onnx_dir.iterdir() if not p.name.endswith(".lock")}
    assert sorted(kept - {RECORDS}) == [exported.path.name]


def test_a_folder_that_is_no_model_fails_clearly_and_publishes_nothing(tmp_path):
    broken = tmp_path / "not-a-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    onnx_dir = tmp_path / "onnx"
    with pytest.raises(OnnxExportError, match="ONNX export failed"):
        ensure_onnx_model(str(broken), "fp32", onnx_dir)
    assert [p.name for p in onnx_dir.iterdir() if not p.name.endswith(".lock")] == []


def test_an_unavailable_model_fails_clearly_without_network(tmp_path):
    with pytest.raises(ValueError, match="not available offline"):
        ensure_onnx_model("candlefire-tests/no-such-model", "fp32", tmp_path)


def test_an_unknown_variant_is_refused(tmp_path):
    with pytest.raises(ValueError, match="variant"):
        ensure_onnx_model("whatever", "fp16", tmp_path)


def test_the_weights_hash_follows_the_content(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights v1")
    (folder / "README.md").write_text("docs")
    first = weights_hash(folder)
    (folder / "README.md").write_text("other docs")  # documentation never changes a vector
    assert weights_hash(folder) == first
    (folder / "model.safetensors").write_bytes(b"weights v2")
    assert weights_hash(folder) != first


def _agreement(mean: float, low: float) -> dict:
    return {"probe_texts": 12, "mean_cosine": mean, "min_cosine": low}


@pytest.mark.parametrize(
    ("batched", "single", "refused"),
    [
        (_agreement(1.0, 0.99999), _agreement(1.0, 1.0), False),
        (_agreement(0.99995, 0.9991), _agreement(1.0, 1.0), False),
        (_agreement(0.99989, 0.9995), _agreement(1.0, 1.0), True),  # mean below 0.9999
        (_agreement(1.0, 1.0), _agreement(0.99999, 0.9989), True),  # one text below 0.999
    ],
)
def test_an_export_that_disagrees_with_torch_is_not_published(batched, single, refused):
    if refused:
        with pytest.raises(SystemExit, match="CANDLEFIRE_EMBED_RUNTIME=torch"):
            check_fp32_agreement(batched, single)
    else:
        assert check_fp32_agreement(batched, single)["min_cosine"] == min(
            batched["min_cosine"], single["min_cosine"]
        )
