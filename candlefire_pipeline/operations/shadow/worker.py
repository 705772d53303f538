"""Shadow reads, the worker process: replays each queued request on every shadow target, one at
a time, compares it with the served answer through the parity harness (the same overlap,
agreement and traced divergence causes as the parity report) and records the comparison.

It runs at the lowest CPU priority by default (SCHED_IDLE where Linux has it, else nice 19; see
CANDLEFIRE_SHADOW_PRIORITY), set before anything heavy is imported so every thread it starts
(ONNX Runtime, Chroma) inherits it: a shadow read only gets the CPU the served path leaves idle.
"""

from __future__ import annotations

import logging
import os
import sys
import time

log = logging.getLogger(__name__)

#: Seconds between two flushes of the local records into Postgres.
FLUSH_EVERY_S = 10.0
#: Seconds before a target that failed to open is tried again (its replays record the error).
REOPEN_AFTER_S = 30.0


def lower_priority(priority: str) -> str:
    """Make this process (and the threads it starts from now on) yield the CPU: "idle" is
    SCHED_IDLE (nice 19 where Linux lacks it), "nice" nice 19, "normal" leaves it as it is."""
    if priority == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except (AttributeError, OSError):
            priority = "nice"
    if priority == "nice":
        os.nice(19)
        return "nice 19"
    return "normal"


def main() -> int:
    """The worker process: Settings first, then jobs until the served side closes the pipe."""
    from candlefire_pipeline.operations.shadow.link import read_frame, write_frame

    jobs, answers = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not hit the pipe
    settings = read_frame(jobs)
    priority = lower_priority(settings.shadow.priority)  # before anything starts a thread
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    replayer = Replayer(settings)
    write_frame(answers, {"priority": priority})
    try:
        while True:
            try:
                job = read_frame(jobs, timeout=FLUSH_EVERY_S)
            except TimeoutError:
                replayer.maybe_flush()
                continue
            except EOFError:
                return 0
            write_frame(answers, replayer.replay(job))
            replayer.maybe_flush()
    finally:
        replayer.close()


class Replayer:
    """Retrievers on the served store and the targets, opened on first use and kept."""

    def __init__(self, settings) -> None:
        from candlefire_pipeline.embedding import embedder_for
        from candlefire_pipeline.retrieval.rerank import load_reranker

        self.settings = settings
        self.embedder = embedder_for(settings, "query")
        self.reranker = load_reranker(settings.retrieval.reranker_model)
        self.retrievers: dict = {}
        self.failed: dict[str, tuple[float, str]] = {}  # name -> (when, why) it failed to open
        self.contexts: dict[tuple[str, str], tuple[float, object]] = {}
        self.flushed_at = time.monotonic()

    def retriever(self, name: str, opener):
        """The Retriever of `name`; raises (with the cached reason) while it cannot be opened."""
        from candlefire_pipeline.retrieval.retriever import Retriever

        if name in self.retrievers:
            return self.retrievers[name]
        failed_at, why = self.failed.get(name, (None, ""))
        if failed_at is not None and time.monotonic() - failed_at < REOPEN_AFTER_S:
            raise RuntimeError(f"{name} unavailable: {why}")
        try:
            backend = opener()
            self.retrievers[name] = Retriever(
                backend, self.embedder, self.settings.retrieval, self.reranker
            )
        except Exception as exc:
            self.failed[name] = (time.monotonic(), f"{type(exc).__name__}: {exc}")
            raise
        self.failed.pop(name, None)
        return self.retrievers[name]

    def replay(self, job) -> int:
        """Every target's comparison of one job, appended to the local records; how many."""
        from candlefire_pipeline.operations.shadow.compare import compare_on_target
        from candlefire_pipeline.operations.shadow.records import append_records
        from candlefire_pipeline.operations.shadow.served import shadow_targets

        offered = shadow_targets(self.settings, job.served_store)
        for name in set(self.retrievers) - {t.name for t in offered} - {job.served_store}:
            self.forget(name)  # no longer offered (retired): its files may go
        # a job that compares itself (the app collection's calls) brings its own comparison,
        # None for a target it cannot be replayed on
        compare = getattr(job, "compare_on", None) or (lambda w, t: compare_on_target(w, job, t))
        records = [r for r in (compare(self, target) for target in offered) if r is not None]
        if records:
            append_records(self.settings.shadow_pending_file, records)
        return len(records)

    def forget(self, name: str) -> None:
        """Close a retriever whose store failed mid-read: the next job reopens it."""
        retriever = self.retrievers.pop(name, None)
        for pair in [p for p in self.contexts if name in p]:
            del self.contexts[pair]
        if retriever is not None:
            try:
                retriever.backend.close()
            except Exception:  # it is being thrown away
                pass

    def maybe_flush(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.flushed_at < FLUSH_EVERY_S:
            return
        from candlefire_pipeline.operations.serving.commands import history_dsn
        from candlefire_pipeline.operations.shadow.records import flush_records

        self.flushed_at = time.monotonic()
        shadow = self.settings.shadow
        try:
            flush_records(history_dsn(self.settings), self.settings.shadow_pending_file,
                          shadow.retention_days)  # fmt: skip
        except Exception as exc:  # the records stay local; the loop goes on
            log.warning("shadow: flush failed (%s); records stay local", type(exc).__name__)

    def close(self) -> None:
        self.maybe_flush(force=True)
        for name in list(self.retrievers):
            self.forget(name)


if __name__ == "__main__":
    sys.exit(main())
