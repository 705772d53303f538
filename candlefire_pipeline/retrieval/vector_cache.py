"""A bounded LRU of query-side embeddings: entity names and keyword variants recur across
requests (an ALS assistant asks about SOD1, TDP-43, C9orf72 all day), the query text rarely.

Entries are keyed by the embedder's identity (model id and dimension) and the text, so one cache
shared by retrievers of different models never hands one model's vector to another. The cached
vector is the one the model made for that text in an earlier call: the same text in another
batch gets the same vector up to float32 rounding (padding is masked), well inside the 3e-6
margin within which the retriever treats similarities as ties. Thread-safe: one reader serves
concurrent requests.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

import numpy as np

#: (model id, dimension) of the embedder that made a vector.
Identity = tuple[str, int]


class QueryVectorCache:
    """Text -> vector for at most `max_entries` texts, least recently used evicted first."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[Identity, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_many(self, identity: Identity, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors of those texts (read-only arrays); the others are misses."""
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vector = self._entries.get((identity, text))
                if vector is None:
                    self.misses += 1
                    continue
                self._entries.move_to_end((identity, text))
                found[text] = vector
                self.hits += 1
        return found

    def put_many(self, identity: Identity, vectors: Mapping[str, np.ndarray]) -> None:
        """Remember these vectors (copied, read-only), evicting the least recently used."""
        if self.max_entries == 0:
            return
        with self._lock:
            for text, vector in vectors.items():
                frozen = np.array(vector, dtype=np.float32, copy=True)
                frozen.setflags(write=False)
                self._entries[(identity, text)] = frozen
                self._entries.move_to_end((identity, text))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    @property
    def hit_rate(self) -> float:
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0
