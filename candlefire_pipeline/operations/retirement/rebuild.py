"""A retired store rebuilt from the ledger's batch files (no re-embedding: the vectors are in
each batch's embeddings.parquet), then checked against the ledger.

The store must hold what it would hold had it never been retired: the current version of every
paper over the candidate's applied batches and its own (applied, begun, or passed over while
retired). A rebuild writes only the papers that differ, so one cut short is finished by the
next; only a clean check records the batches as applied to the store again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.generations.registry import extra_generations
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.repair import RepairReport, plan_repair, repair_store
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE

log = logging.getLogger(__name__)

#: (store name, the target's settings) -> the open backend, as a context manager
Opener = Callable[[str, Settings], AbstractContextManager]


@dataclass(frozen=True)
class Target:
    """One collection of the store: the default generation's, or a live generation's."""

    store: str
    generation: str
    settings: Settings

    @property
    def ledger(self) -> StoreLedger:
        """The store's ledger in this generation's batch directories."""
        return StoreLedger(self.settings.batches_dir, self.store)


def targets(settings: Settings, store: str) -> list[Target]:
    """The store's default generation target, then every live generation's (their assets write
    the store too, so their checks hold once it is written again)."""
    extra = extra_generations(settings)
    return [
        Target(store, DEFAULT_NAME, settings),
        *(Target(store, g.name, generation_settings(settings, g)) for g in extra),
    ]


def ledger_view(ledger: StoreLedger) -> list[str]:
    """The batches the store must hold: the candidate's applied ones, and its own applied,
    begun (interrupted) and passed-over ones."""
    candidate = StoreLedger(ledger.batches_dir, CANDIDATE).applied()
    own = [*ledger.applied(), *ledger.interrupted(), *ledger.passed_over()]
    return sorted(set(candidate) | set(own))


def rebuild(backend, ledger: StoreLedger) -> RepairReport:
    """Write every paper the store lacks or holds otherwise than its ledger view, delete what
    the view does not know; record nothing (see `record_rebuilt`)."""
    view = ledger_view(ledger)
    started = time.perf_counter()
    report = repair_store(backend, ledger.batches_dir, apply=True, view=view)
    log.info(
        "%s rebuilt from %d batches in %.1f s: %d papers written (%d chunks), %d deleted",
        backend.name, len(view), time.perf_counter() - started, report.papers_rewritten,
        report.rows_written, report.papers_deleted,
    )  # fmt: skip
    return report


def differing(backend, ledger: StoreLedger) -> tuple[list[str], dict[str, int], int]:
    """(the view's batches, missing / orphaned / stale chunk counts, expected chunks)."""
    view = ledger_view(ledger)
    plan = plan_repair(backend, ledger.batches_dir, view)
    return view, {"missing": len(plan.missing), "orphaned": len(plan.orphaned),
                  "stale": len(plan.stale)}, plan.expected_chunks  # fmt: skip


def record_rebuilt(ledger: StoreLedger, view: list[str]) -> None:
    """The store holds the view's current versions (checked): each batch is applied to it."""
    record = {"applied_at": time.time(), "rebuilt_from_ledger": True}
    for key in view:  # the view holds every begun and passed-over batch: none is left marked
        ledger.mark_rebuilt(key, record)
