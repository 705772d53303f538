"""The exported-ONNX cache: one folder per (model, weights hash, variant), published atomically.

An export runs once, in a subprocess (the only place torch is imported), under a file lock so
concurrent exporters wait for the first; a folder is published by renaming a finished temp
folder, and every load checks the model file against the SHA-256 in its manifest, so a
truncated or corrupted export is detected, discarded and exported again. The original weights'
hash that names the folder is kept beside their files' stats (weights_memo.py): a start whose
weights are unchanged does not read them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.embedding.model_files import logical_model_id, model_dir
from candlefire_pipeline.embedding.weights_memo import known_weights_hash
from candlefire_pipeline.fsutil import file_lock

logger = logging.getLogger(__name__)

MANIFEST_FORMAT = 1
VARIANTS = ("fp32", "int8")
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
#: An export of a large model on a loaded 2-core machine takes minutes, never an hour.
EXPORT_TIMEOUT_S = 3600


class OnnxExportError(RuntimeError):
    """The model could not be exported to ONNX, or the export disagrees with torch."""


@dataclass(frozen=True)
class OnnxArtifact:
    """A verified exported model: its folder, its manifest and whether this call exported it."""

    path: Path
    manifest: dict
    exported: bool = False

    @property
    def model_path(self) -> Path:
        return self.path / MODEL_FILE

    @property
    def tokenizer_path(self) -> Path:
        return self.path / TOKENIZER_FILE


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def artifact_dir(onnx_dir: Path, model_id: str, source_hash: str, variant: str) -> Path:
    slug = logical_model_id(model_id).replace("/", "--")
    return Path(onnx_dir) / f"{slug}-{source_hash[:16]}-{variant}"


def check_artifact(path: Path, source_hash: str, variant: str) -> dict:
    """The manifest of a complete, intact export, or ValueError saying what is wrong."""
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"no readable manifest: {exc}") from exc
    expected = {"format": MANIFEST_FORMAT, "source_hash": source_hash, "variant": variant}
    for key, value in expected.items():
        if manifest.get(key) != value:
            raise ValueError(f"manifest {key} is {manifest.get(key)!r}, expected {value!r}")
    for name, key in ((MODEL_FILE, "onnx"), (TOKENIZER_FILE, "tokenizer")):
        file = path / name
        if not file.is_file():
            raise ValueError(f"{name} is missing")
        if file.stat().st_size != manifest[f"{key}_bytes"]:
            raise ValueError(f"{name} has {file.stat().st_size} bytes, the manifest says"
                             f" {manifest[f'{key}_bytes']}")  # fmt: skip
        if file_sha256(file) != manifest[f"{key}_sha256"]:
            raise ValueError(f"{name} does not match the SHA-256 in its manifest")
    return manifest


def _valid(path: Path, source_hash: str, variant: str) -> dict | None:
    if not path.exists():
        return None
    try:
        return check_artifact(path, source_hash, variant)
    except ValueError as exc:
        logger.warning("discarding the ONNX export in %s: %s", path, exc)
        return None


def _discard(path: Path) -> None:
    """Move a broken folder out of the way (atomically) before deleting it."""
    if path.exists():
        aside = path.with_name(f".discard-{path.name}-{uuid.uuid4().hex[:8]}")
        os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _run_exporter(args: list[str]) -> None:
    command = [sys.executable, "-m", "candlefire_pipeline.embedding.onnx_export", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=EXPORT_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise OnnxExportError(f"ONNX export failed (exit {done.returncode}):\n{tail}")
    logger.info("ONNX export finished in %.1f s", time.perf_counter() - started)


def _export(model_id: str, source: Path, source_hash: str, variant: str, final: Path) -> dict:
    """Export into a temp folder next to `final`, verify it, then publish it by renaming."""
    for stale in final.parent.glob(f".tmp-{final.name}-*"):  # left by a crashed exporter
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.with_name(f".tmp-{final.name}-{uuid.uuid4().hex[:8]}")
    args = ["--source", str(source), "--out", str(tmp), "--variant", variant]
    args += ["--model-id", logical_model_id(model_id), "--source-hash", source_hash]
    if variant == "int8":
        fp32 = ensure_onnx_model(model_id, "fp32", final.parent)
        args += ["--fp32", str(fp32.path)]
    logger.info("exporting %s to ONNX (%s) into %s", logical_model_id(model_id), variant, final)
    try:
        _run_exporter(args)
        try:
            manifest = check_artifact(tmp, source_hash, variant)
        except ValueError as exc:
            raise OnnxExportError(f"the exporter wrote an unusable folder: {exc}") from exc
        _discard(final)
        os.rename(tmp, final)
        _fsync_dir(final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def ensure_onnx_model(model_id: str, variant: str, onnx_dir: Path) -> OnnxArtifact:
    """The verified ONNX export of `model_id`, exporting it first when missing or broken."""
    if variant not in VARIANTS:
        raise ValueError(f"ONNX variant must be one of {VARIANTS}, got {variant!r}")
    source = model_dir(model_id)
    source_hash = known_weights_hash(source, onnx_dir)  # re-read only when a file changed
    final = artifact_dir(onnx_dir, model_id, source_hash, variant)
    manifest = _valid(final, source_hash, variant)
    if manifest is not None:
        return OnnxArtifact(final, manifest)
    with file_lock(final.with_name(f".{final.name}.lock")):
        manifest = _valid(final, source_hash, variant)  # another exporter may have finished
        if manifest is not None:
            return OnnxArtifact(final, manifest)
        manifest = _export(model_id, source, source_hash, variant, final)
        return OnnxArtifact(final, manifest, exported=True)
