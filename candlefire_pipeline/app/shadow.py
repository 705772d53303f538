"""Shadow reads of the app's collection calls: a sampled call (CANDLEFIRE_SHADOW_RATE) is replayed
by the shadow worker process on the store that does not serve and compared with what was served.

The served side is operations/shadow/served.py's (sampling, the bounded queue, the worker at the
lowest CPU priority, `offer_job` never blocks and never raises); the records are the reader's
(shadow_comparisons), one per call, so the shadow window and its gates judge them with the
reader's: `overlap` is the share of ids both answers hold (per query text, averaged),
`grounding_equal` whether each list is empty on both or on neither (what a grounding call asks),
`keyword_equal` whether the answers are identical (ids in order, distances within 1e-5).
The job carries the query vectors, so the replay embeds nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.stores import SERVABLE_STORES

if TYPE_CHECKING:
    from candlefire_pipeline.operations.shadow.records import ShadowRecord
    from candlefire_pipeline.settings import Settings

# The shadow's records and worker load only where the shadow runs (CANDLEFIRE_SHADOW_RATE > 0,
# or the worker process): the app's read path without it loads neither.

log = logging.getLogger(__name__)

#: Distances closer than this are the same answer (Chroma computes them in float32).
DISTANCE_TOLERANCE = 1e-5
#: Stores opened by the worker process for replays, by target name (kept for its lifetime).
_OPENED: dict = {}


def _lists(call, answer: dict) -> tuple[list[list[str]], list[list[float]] | None]:
    """An answer's ids as lists (one per query text; a get's is one list), with distances."""
    if isinstance(call, QueryCall):
        return answer["ids"], answer.get("distances")
    return [answer["ids"]], None


@dataclass(frozen=True)
class CallJob:
    """One served collection call, as the worker needs it to replay and judge it."""

    recorded_at: str
    served_store: str
    call: GetCall | QueryCall
    vectors: np.ndarray | None
    served_ids: list
    served_distances: list | None
    served_ms: float

    @classmethod
    def of(cls, served_store: str, call, vectors, answer: dict, seconds: float) -> CallJob:
        """`vectors` may be a function giving them (made only for a sampled call)."""
        vectors = vectors() if callable(vectors) else vectors
        ids, distances = _lists(call, answer)
        return cls(datetime.now(UTC).isoformat(), served_store, call, vectors, ids, distances,
                   seconds * 1000.0)  # fmt: skip

    def query_hash(self) -> str:
        call = self.call
        shape = {k: v for k, v in vars(call).items() if k not in ("where", "where_document",
                                                                  "vectors")}  # fmt: skip
        if self.vectors is not None:
            shape["vectors"] = hashlib.sha256(np.ascontiguousarray(self.vectors)).hexdigest()
        canonical = json.dumps([type(call).__name__, shape], sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def compare_on(self, replayer, target) -> ShadowRecord | None:
        """The record of this call replayed on `target` (None: not a store the app reads)."""
        from candlefire_pipeline.operations.shadow.records import ShadowRecord

        if target.backend not in SERVABLE_STORES:
            return None
        keep = replayer.settings.shadow.keep_text
        texts = getattr(self.call, "texts", None)
        record = ShadowRecord(
            record_id=uuid.uuid4().hex, recorded_at=self.recorded_at,
            query_hash=self.query_hash(), served_store=self.served_store,
            shadow_store=target.name, served_ms=self.served_ms,
            query_text=" | ".join(texts) if keep and texts else None,
        )  # fmt: skip
        try:
            store = _store(replayer, target)
            started = time.perf_counter()
            answer = self._replay(store)
            record.shadow_ms = (time.perf_counter() - started) * 1000.0
        except Exception as exc:  # any failure of the shadow read is its record
            _forget(target.name)
            record.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
            return record
        judge(record, self.served_ids, self.served_distances, *_lists(self.call, answer))
        return record

    def _replay(self, store) -> dict:
        if isinstance(self.call, GetCall):
            return store.get(self.call)
        return store.query(self.call, self.vectors)


def _store(replayer, target):
    from candlefire_pipeline.app.stores import open_store

    if target.name not in _OPENED:
        _OPENED[target.name] = open_store(Target(target.backend), replayer.settings,
                                          replayer.embedder)  # fmt: skip
    return _OPENED[target.name]


def _forget(name: str) -> None:
    """Drop a store whose read failed: the next replay opens it again."""
    store = _OPENED.pop(name, None)
    if store is not None:
        try:
            store.close()
        except Exception:  # it is being thrown away
            pass


def judge(record: ShadowRecord, served: list, served_d, shadow: list, shadow_d) -> None:
    """Fill the record's agreement from the served and the replayed id lists."""
    overlaps, empty_alike, identical = [], True, len(served) == len(shadow)
    for i, (a, b) in enumerate(zip(served, shadow, strict=False)):
        union = max(len(a), len(b))
        overlaps.append(len(set(a) & set(b)) / union if union else 1.0)
        empty_alike &= bool(a) == bool(b)
        identical &= a == b and _close(served_d, shadow_d, i)
    record.overlap = float(np.mean(overlaps)) if overlaps else 1.0
    record.grounding_equal = empty_alike
    record.keyword_equal = identical
    if not identical:
        record.divergences = [{"kind": "other", "field": "ids",
                               "detail": f"overlap {record.overlap:.3f}"}]  # fmt: skip


def _close(a, b, i: int) -> bool:
    if a is None or b is None:
        return True
    return bool(np.allclose(a[i], b[i], rtol=0.0, atol=DISTANCE_TOLERANCE)) if a[i] else True


class CallShadow:
    """The collection's side: offers each served call to the shadow worker when enabled."""

    def __init__(self, settings: Settings, worker=None) -> None:
        self.settings, self._worker = settings, worker

    @property
    def worker(self):
        if self._worker is None and self.settings.shadow.enabled:
            from candlefire_pipeline.operations.shadow.served import shared_worker

            self._worker = shared_worker(self.settings)
        return self._worker

    def offer(self, served_store: str, call, vectors, answer: dict, seconds: float) -> bool:
        worker = self.worker
        if worker is None:
            return False
        return worker.offer_job(lambda: CallJob.of(served_store, call, vectors, answer, seconds))
