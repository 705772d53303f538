"""`candlefire retire` and `candlefire unretire`: the last two steps of the migration and its
way back, each one transition of the serving switch (operations/serving/table.py).

retire: the soak read from the switch history and the latest report's gates evaluated now go to
the switch; accepted, the store is no longer written (its assets pass over, its checks say so);
with --delete-files the ledger state is exported, then its files go. unretire: the store is
rebuilt from the ledger's batch files and checked against it, and only a clean check makes it
a rollback target again; anything that stops midway leaves it retired, and a re-run finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import opened_backend, resolve_dsn
from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.operations.retirement import files
from candlefire_pipeline.operations.retirement.rebuild import (
    Opener,
    differing,
    rebuild,
    record_rebuilt,
    targets,
)
from candlefire_pipeline.operations.retirement.soak import soak_evidence
from candlefire_pipeline.operations.retirement.view import store_writes
from candlefire_pipeline.operations.serving.commands import Order, history_dsn, refusal
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.machine import (
    RETIRE,
    UNRETIRE,
    Evidence,
    Outcome,
    read_state,
    sync_history,
    transition,
)
from candlefire_pipeline.operations.serving.proofs import Rebuilt
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, QDRANT, REFERENCE, RETIRABLE_STORES


@dataclass(frozen=True)
class Retired:
    """A retire's outcome, and what --delete-files did (None: not asked, or not retired)."""

    outcome: Outcome
    export: Path | None = None
    freed_bytes: int = 0


def check_retirable(store: str) -> None:
    """A clear error for a store `retire` / `unretire` cannot act on."""
    if store in RETIRABLE_STORES:
        return
    if store == QDRANT:
        raise ValueError(
            "qdrant is an evaluated store: retire it by leaving it out of CANDLEFIRE_STORES "
            "(nothing gates on it, serves from it or waits for it)"
        )
    if store == CANDIDATE:
        raise ValueError("pgvector is what serves: it cannot be retired")
    raise ValueError(f"unknown store {store!r}: only {', '.join(RETIRABLE_STORES)} can be retired")


def _reference_p95(report) -> float | None:
    if report is None or REFERENCE not in report.backends:
        return None
    return report.latency(REFERENCE, "p95", store_only=True)


def retire(
    settings: Settings,
    store: str,
    order: Order,
    delete_files: bool = False,
    now: datetime | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Retired:
    """Stop writing `store` if the soak's evidence holds (judged at `now`); with delete_files,
    once it is retired (now or before), export its ledger state and delete its files."""
    check_retirable(store)
    current = read_state(settings.serving_file)
    try:
        dsn = resolve_dsn(settings)
        if sync_history(settings, dsn).pending:
            raise BackendUnavailableError("the switch history queued locally was not inserted")
        rows = history(dsn, limit=None)
    except (BackendUnavailableError, psycopg.Error) as exc:
        why = exc if isinstance(exc, BackendUnavailableError) else type(exc).__name__
        return Retired(refusal(RETIRE, current, "the switch history cannot be read, so the soak "
                               f"cannot be proven; nothing changed: {why}"))  # fmt: skip
    with store_writes(settings, store):  # no write of the store is in flight as it retires
        current = read_state(settings.serving_file)
        days = settings.watch.retire_soak_days
        soak = soak_evidence(rows, current, days, now or datetime.now(UTC))
        report, gates = latest_evaluation(settings)
        evidence = replace(Evidence.of(report, gates), soak=soak,
                           reference_p95_ms=_reference_p95(report))  # fmt: skip
        outcome = transition(settings, RETIRE, order.reason, order.actor, evidence, dsn=dsn)
    retirement = outcome.state.retired.get(store)
    if not delete_files or retirement is None:
        return Retired(outcome)
    export = files.export_ledger(settings, store, retirement)
    say(f"ledger state of {store} exported to {export}")
    return Retired(outcome, export, files.delete_files(settings, store, say))


def _rebuild_all(settings: Settings, store: str, opener: Opener, say) -> None:
    for target in targets(settings, store):
        with opener(store, target.settings) as backend:
            report = rebuild(backend, target.ledger)
        say(f"{store}/{target.generation}: {report.papers_rewritten} papers written "
            f"({report.rows_written} chunks), {report.papers_deleted} deleted")  # fmt: skip


def _checked(settings: Settings, store: str, opener: Opener) -> Rebuilt:
    """Catch up with what was written meanwhile, check every target, and record a clean one's
    batches as applied (the caller holds the store's write lock)."""
    views, totals, chunks = [], {"missing": 0, "orphaned": 0, "stale": 0}, 0
    for target in targets(settings, store):
        with opener(store, target.settings) as backend:
            rebuild(backend, target.ledger)  # nothing, unless a drop landed meanwhile
            view, counts, expected = differing(backend, target.ledger)
        views.append((target, view))
        totals = {k: totals[k] + counts[k] for k in totals}
        chunks += expected
    proof = Rebuilt(store, tuple(t.generation for t, _ in views),
                    len({k for _, v in views for k in v}), chunks, totals)  # fmt: skip
    if proof.clean:
        for target, view in views:
            record_rebuilt(target.ledger, view)
    return proof


def unretire(
    settings: Settings,
    store: str,
    order: Order,
    opener: Opener = opened_backend,
    say: Callable[[str], None] = lambda _: None,
) -> Outcome:
    """Rebuild `store` from the ledger, check it, and only then make it a rollback target."""
    check_retirable(store)
    if store not in read_state(settings.serving_file).retired:  # nothing to rebuild
        return transition(settings, UNRETIRE, order.reason, order.actor, dsn=history_dsn(settings))
    _rebuild_all(settings, store, opener, say)  # the long part: drops may land meanwhile
    with store_writes(settings, store):
        proof = _checked(settings, store, opener)
        say(proof.describe() + ("" if proof.clean else f": DIFFERS {proof.differing}"))
        return transition(settings, UNRETIRE, order.reason, order.actor, Evidence(rebuilt=proof),
                          dsn=history_dsn(settings))  # fmt: skip
