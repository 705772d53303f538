"""An embedder wrapper that embeds each distinct text once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class MemoEmbedder:
    """The wrapped embedder, each text embedded once: the same vectors for every store a query
    set runs on, and sweeps that time the store, not the model."""

    def __init__(self, embedder) -> None:
        self.inner = embedder
        self.model_id, self.dim = embedder.model_id, embedder.dim
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self._memo.update(zip(missing, self.inner.embed(missing), strict=True))
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])
