"""Shadow reads, the served side: which requests to replay, on which targets, and the bounded
hand-off to the worker process (operations/shadow/worker.py).

The served answer never waits for a shadow read and never fails because of one: `offer` samples
the request (CANDLEFIRE_SHADOW_RATE), puts a small job on a bounded queue without blocking
(a full queue drops the replay and counts it) and swallows any error of its own. The worker is
a separate process at the lowest CPU priority, so a shadow read (seconds of CPU for an
in-process Chroma at 62k chunks) takes its own GIL and only the CPU the served path leaves idle.
"""

from __future__ import annotations

import atexit
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.operations.shadow.link import WorkerLink
from candlefire_pipeline.retrieval.retriever import Retrieval
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import QDRANT, SERVABLE_STORES

log = logging.getLogger(__name__)

#: Seconds before a dead worker is started again, and between two "dropping" warnings.
RESTART_EVERY_S = 30.0
WARN_EVERY_S = 60.0
#: Seconds `close` waits for the worker to finish its current job before killing it.
CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ShadowTarget:
    """Something the worker can build a Retriever for: a name for the records and how to open
    its backend. Candidate index generations become targets the same way (a name such as
    `pgvector@g2` and an opener for that generation's table)."""

    name: str
    backend: str

    def open(self, settings: Settings) -> VectorBackend:
        return open_backend(self.backend, settings)


def shadow_targets(settings: Settings, served: str) -> list[ShadowTarget]:
    """The written stores that do not serve (a retired one is never offered: it is not written,
    its files may be gone). Qdrant joins only as a server: its local mode is one process at a
    time, and a reader holding it would stall the ingest runs that write it."""
    names = [s for s in written_stores(settings) if s != served]
    names = [s for s in names if s in SERVABLE_STORES or (s == QDRANT and settings.qdrant_url)]
    return [ShadowTarget(name, name) for name in names]


def _pmid_rows(rows: list[dict]) -> list[dict]:
    """Rows cut to their PMID: what the comparison reads, small enough for the pipe."""
    return [{"pmid": row["pmid"]} for row in rows]


@dataclass(frozen=True)
class ShadowJob:
    """One served request, as the worker needs it: the query, what was served, how fast."""

    recorded_at: str
    query: str
    entities: tuple[str, ...]
    terms: tuple[str, ...] | None  # None: the app's rule takes them from the query text
    served_store: str
    served: Retrieval  # slimmed: PMIDs only, no documents
    served_ms: float

    @classmethod
    def of(cls, served_store: str, query: str, entities, terms, answer: Retrieval,
           seconds: float) -> ShadowJob:  # fmt: skip
        slim = replace(
            answer,
            results=_pmid_rows(answer.results),
            semantic=_pmid_rows(answer.semantic),
            entities=_pmid_rows(answer.entities),
            keyword=_pmid_rows(answer.keyword),
            fused=_pmid_rows(answer.fused),
            citations=replace(answer.citations, papers=_pmid_rows(answer.citations.papers)),
            timings=dict(answer.timings),
        )
        return cls(
            datetime.now(UTC).isoformat(), query, tuple(entities),
            None if terms is None else tuple(terms), served_store,
            slim, seconds * 1000.0,
        )  # fmt: skip


@dataclass
class ShadowStats:
    """Counters of the served side (and of the worker's acknowledgements)."""

    offered: int = 0  # served requests seen
    sampled: int = 0  # chosen by the rate
    queued: int = 0  # handed to the worker
    dropped_full: int = 0  # the queue was full
    dropped_down: int = 0  # the worker was closed
    errors: int = 0  # failures of the hand-off itself (logged)
    done: int = 0  # jobs the worker finished
    recorded: int = 0  # comparisons it recorded (one per job and target)
    lost: int = 0  # jobs in flight when the worker died
    restarts: int = 0
    last_warning: float = field(default=0.0, repr=False)

    @property
    def coverage(self) -> float:
        """Share of the sampled requests that were replayed and recorded."""
        return self.done / self.sampled if self.sampled else 0.0


class ShadowWorker:
    """The served side of shadow reads: samples, queues, and feeds the worker process.

    `offer` only does a non-blocking put on a bounded in-process queue. A feeder thread sends
    one job at a time to the worker process (`python -m ...shadow.worker`, its own interpreter
    and GIL) and waits for its acknowledgement, so at most queue_size + 1 replays are pending.
    """

    def __init__(self, settings: Settings, start: bool = True) -> None:
        self.settings = settings
        self.stats = ShadowStats()
        self._random = random.Random()
        self._jobs: queue.Queue = queue.Queue(maxsize=settings.shadow.queue_size)
        self._lock = threading.Lock()  # guards the counters
        self._stop = threading.Event()
        self._link: WorkerLink | None = None
        self._failed_at = 0.0  # when the worker last died or failed to start
        self._feeder: threading.Thread | None = None
        if start:
            self.start()

    def start(self) -> None:
        self._stop.clear()
        self._feeder = threading.Thread(target=self._feed, name="shadow-feeder", daemon=True)
        self._feeder.start()

    def offer(self, served_store: str, query: str, entities: Sequence[str],
              terms: Sequence[str] | None, answer: Retrieval, seconds: float) -> bool:  # fmt: skip
        """Maybe replay this served request; never blocks, never raises. True if queued."""
        return self.offer_job(
            lambda: ShadowJob.of(served_store, query, entities, terms, answer, seconds)
        )

    def offer_job(self, make_job: Callable[[], object]) -> bool:
        """Maybe replay a served request: `make_job()` builds the job only when it is sampled.
        A job with a `compare_on(replayer, target)` method is compared by it in the worker (the
        app's collection calls); a ShadowJob by compare.py. Never blocks, never raises."""
        try:
            outcome = self._offer(make_job)
        except Exception as exc:  # a shadow read must never fail a served one
            outcome = "errors"
            log.warning("shadow: replay not queued (%s: %s)", type(exc).__name__, exc)
        with self._lock:
            self.stats.offered += 1
            if outcome in ("queued", "dropped_full", "dropped_down"):
                self.stats.sampled += 1
            if outcome:
                setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
            if outcome.startswith("dropped"):
                self._warn_dropping()
        return outcome == "queued"

    def _offer(self, make_job: Callable[[], object]) -> str:
        """What became of one served request: "" (not sampled), queued or a dropped_* counter."""
        if self._random.random() >= self.settings.shadow.rate:
            return ""
        if self._stop.is_set():  # closed
            return "dropped_down"
        try:
            self._jobs.put_nowait(make_job())
        except queue.Full:
            return "dropped_full"
        return "queued"

    def _warn_dropping(self) -> None:
        now = time.monotonic()
        if now - self.stats.last_warning >= WARN_EVERY_S:
            self.stats.last_warning = now
            log.warning("shadow: replays dropped so far: %d (queue full), %d (worker down)",
                        self.stats.dropped_full, self.stats.dropped_down)  # fmt: skip

    # the feeder thread ------------------------------------------------------------------------
    def _feed(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._send(job)
            except Exception:  # the feeder must outlive any one job, or the queue fills for good
                log.exception("shadow: a replay failed in the feeder; it is counted lost")
                with self._lock:
                    self.stats.lost += 1

    def _send(self, job: ShadowJob) -> None:
        """One job through the worker; a dead worker loses it (counted) and is restarted."""
        try:
            link = self._alive_link()
            if link is None:
                with self._lock:
                    self.stats.lost += 1
                return
            recorded = link.replay(job)
        except (OSError, EOFError, ValueError) as exc:
            log.error("shadow: the worker process failed (%s: %s); restarting it in %g s",
                      type(exc).__name__, exc, RESTART_EVERY_S)  # fmt: skip
            with self._lock:
                self.stats.lost += 1
            self._drop_link()
            self._failed_at = time.monotonic()
            return
        with self._lock:
            self.stats.done += 1
            self.stats.recorded += recorded

    def _alive_link(self) -> WorkerLink | None:
        """The running worker; started on first use, restarted at most every RESTART_EVERY_S
        (a crash loop must not eat the machine); None while it is down (the job is lost)."""
        if self._link is not None and self._link.alive():
            return self._link
        self._drop_link()
        if time.monotonic() - self._failed_at < RESTART_EVERY_S:
            return None
        if self._failed_at > 0:
            with self._lock:
                self.stats.restarts += 1
        self._link = WorkerLink.start(self.settings)
        return self._link

    def _drop_link(self) -> None:
        if self._link is not None:
            self._link.close(timeout=0.0)
            self._link = None
            self._failed_at = time.monotonic()

    # control --------------------------------------------------------------------------------
    def drain(self, timeout: float) -> bool:
        """Wait until every queued job is done or lost (tests, benchmarks); False on timeout."""
        deadline = time.monotonic() + timeout
        while self.stats.done + self.stats.lost < self.stats.queued:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        """Stop feeding: the worker finishes its current job; queued jobs are not replayed."""
        self._stop.set()
        link = self._link
        if link is not None:  # the feeder may be waiting for this job's answer: it gets EOF
            link.close(CLOSE_TIMEOUT_S)
        if self._feeder is not None:
            self._feeder.join(CLOSE_TIMEOUT_S)
            self._feeder = None
        self._link = None

    def __enter__(self) -> ShadowWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(settings: Settings) -> ShadowWorker:
    """One worker per process and data dir, shared by every reader; stopped at exit."""
    with _SHARED_LOCK:
        worker = _SHARED.get(settings.data_dir)
        if worker is None:
            worker = _SHARED[settings.data_dir] = ShadowWorker(settings)
            atexit.register(worker.close)
        return worker
