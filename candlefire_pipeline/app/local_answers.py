"""Answers copied into the app's process, each kept for the content it was read at.

A call's answer (its rows, or a count) is kept under the call's key and the Epoch the watch
proved when the call began, only if the version read after its last statement is that same
Epoch (app/pg_store.py): then every statement of the call saw exactly that content. It is
served again only while the watch proves that Epoch current (app/watch.py), and forgotten when
the watch moves. Bounded by an estimate of the bytes held (CANDLEFIRE_APP_LOCAL_MB), least
recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from candlefire_pipeline.app.results import Row

#: what a row costs beside its text (the objects, the metadata values)
ROW_OVERHEAD = 400
KEY_OVERHEAD = 200


def size_of(value) -> int:
    """About the bytes an answer holds (its documents, metadata and vectors)."""
    if isinstance(value, Row):
        vector = 0 if value.vector is None else value.vector.nbytes
        return ROW_OVERHEAD + len(value.document) + 40 * len(value.metadata) + vector
    if isinstance(value, list | tuple):
        return 56 + sum(size_of(item) for item in value)
    return 32


class LocalAnswers:
    """call key -> (epoch, answer), bounded by `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: OrderedDict[Hashable, tuple[object, object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.kept = self.evicted = 0

    def get(self, epoch, key: Hashable):
        with self._lock:
            found = self._kept.get(key)
            if found is None or found[0] != epoch:
                self.misses += 1
                return None
            self._kept.move_to_end(key)
            self.hits += 1
            return found[1]

    def put(self, epoch, key: Hashable, answer) -> None:
        size = KEY_OVERHEAD + size_of(answer)
        if size > self.budget:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._kept[key] = (epoch, answer, size)
            self._bytes += size
            self.kept += 1
            while self._bytes > self.budget:
                _, (_, _, gone) = self._kept.popitem(last=False)
                self._bytes -= gone
                self.evicted += 1

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    @property
    def entries(self) -> int:
        return len(self._kept)

    @property
    def bytes(self) -> int:
        return self._bytes
