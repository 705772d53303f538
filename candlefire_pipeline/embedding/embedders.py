"""Embedder protocol, the sentence-transformers embedder and a fast lexical hashing embedder."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from candlefire_pipeline.embedding.model_files import logical_model_id, model_source
from candlefire_pipeline.settings import EMBED_RUNTIMES

if TYPE_CHECKING:
    from candlefire_pipeline.settings import Settings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

HASHING_MODEL_ID = "hashing-v1"
_WORD = re.compile(r"\w+")
_MODELS: dict[str, SentenceTransformer] = {}
_MODELS_LOCK = threading.Lock()


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows of shape (n, dim)."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _load_model(source: str) -> SentenceTransformer:
    """Load a SentenceTransformer once per process, offline and on CPU."""
    with _MODELS_LOCK:
        if source not in _MODELS:
            # Read by huggingface_hub at import time; local_files_only covers a late import.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            logger.info("loading sentence-transformers model from %s", source)
            try:
                _MODELS[source] = SentenceTransformer(source, device="cpu", local_files_only=True)
            except OSError as exc:
                raise ValueError(
                    f"embedding model {source!r} is not available offline; set "
                    "CANDLEFIRE_EMBED_MODEL to a local weights folder or a cached model id"
                ) from exc
        return _MODELS[source]


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model; the dimension is read from the model."""

    runtime = "torch"

    def __init__(self, model_id: str, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_id = logical_model_id(model_id)
        self.batch_size = batch_size
        self.model = _load_model(model_source(model_id))
        dim = self.model.get_embedding_dimension()
        if dim is None:  # some module stacks do not declare it; ask the model itself
            dim = int(self.model.encode(["dimension probe"], convert_to_numpy=True).shape[1])
        self.dim = int(dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


@lru_cache(maxsize=1 << 16)
def _bucket(token: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of a token (blake2b, unlike Python's salted hash())."""
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return (value >> 1) % dim, 1.0 if value & 1 else -1.0


class HashingEmbedder:
    """Deterministic lexical embedder (signed feature hashing of words); for storage tests."""

    #: not a neural model: every runtime setting gives these same vectors
    runtime = "python"

    def __init__(self, dim: int = 64, model_id: str = HASHING_MODEL_ID) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.model_id = model_id
        # Texts without words still need a unit vector so every row stays rankable.
        self._empty = np.full(dim, 1.0 / np.sqrt(dim), dtype=np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float64)
        for token in _WORD.findall(text.lower()):
            index, sign = _bucket(token, self.dim)
            vector[index] += sign
        norm = np.linalg.norm(vector)
        if norm == 0.0:
            return self._empty.copy()
        return (vector / norm).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.embed_one(text)
        return out


def _hashing_dim(model_id: str) -> int | None:
    """64 for "hashing-v1", N for "hashing-v1:N", None for any other id."""
    if model_id == HASHING_MODEL_ID:
        return 64
    prefix = HASHING_MODEL_ID + ":"
    if not model_id.startswith(prefix):
        return None
    raw = model_id[len(prefix) :]
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"hashing embedder id must be '{prefix}<dim>' with dim >= 1: {model_id!r}")
    return int(raw)


@cache
def load_embedder(
    model_id: str, batch_size: int = 64, runtime: str = "torch", onnx_dir: Path | None = None
) -> Embedder:
    """The embedder for `model_id` on `runtime`, built once per process.

    "hashing-v1[:dim]" is the fast lexical embedder (any runtime). "onnx" and "onnx-int8" load
    the model exported into `onnx_dir` (exported there first if needed) and never import torch.
    """
    if runtime not in EMBED_RUNTIMES:
        raise ValueError(f"embedding runtime must be one of {sorted(EMBED_RUNTIMES)}: {runtime!r}")
    dim = _hashing_dim(model_id)
    if dim is not None:
        return HashingEmbedder(dim=dim, model_id=model_id)
    if runtime == "torch":
        return SentenceTransformerEmbedder(model_id, batch_size=batch_size)
    from candlefire_pipeline.embedding.onnx_embedder import OnnxEmbedder

    if onnx_dir is None:
        raise ValueError(f"runtime {runtime!r} needs onnx_dir, the cache of exported models")
    return OnnxEmbedder(model_id, Path(onnx_dir), runtime=runtime, batch_size=batch_size)


def embedder_for(settings: Settings, path: str) -> Embedder:
    """The configured embedder of the "query" or "bulk" path (their vectors always match)."""
    return load_embedder(
        settings.model_id,
        batch_size=settings.embed_batch_size,
        runtime=settings.embed_runtime(path),
        onnx_dir=settings.onnx_dir,
    )
