"""After a restore (ours, or a provider's point-in-time restore of an external Postgres): the
ledger re-applied to every pgvector table, the store checked, and the switch and its history
made to agree with what the store holds.

The ledger lives in the batch directories, outside Postgres, so it knows every batch accepted
after the restored point: `repair --apply` writes each paper whose chunks differ from its
current version and deletes papers with no live version, per generation (a generation created
or promoted after the backup is rebuilt from its own ledger before anything serves it). The
switch file is outside Postgres too: it is the truth; the history table lost the rows after the
restored point, and gets one `restored` row recording the switch as it stands.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.operations.backup.checks import CheckReport, check_indexes, check_store
from candlefire_pipeline.operations.backup.tables import pg_generations
from candlefire_pipeline.operations.repair import RepairRefusedError, RepairReport, repair_store
from candlefire_pipeline.operations.serving.history import (
    HISTORY_TABLE,
    RESTORED,
    flush,
    history,
    queue_entry,
)
from candlefire_pipeline.operations.serving.machine import switch_lock
from candlefire_pipeline.operations.serving.published import publish_switch
from candlefire_pipeline.operations.serving.state import ServingState, read_state
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE


@dataclass
class ReconcileReport:
    #: generation -> its repair (before / after counts against its ledger)
    repaired: dict[str, RepairReport] = field(default_factory=dict)
    checks: CheckReport = field(default_factory=CheckReport)
    switch: str = ""
    history_recorded: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.checks.ok

    def lines(self) -> list[str]:
        out = []
        for name, rep in self.repaired.items():
            before, after = rep.plan, rep.after or rep.plan
            found = ", ".join(f"{k} {v}" for k, v in before.counts.items())
            left = ", ".join(f"{k} {v}" for k, v in after.counts.items())
            out.append(
                f"{name}: {len(before.batches)} batches in its ledger; found {found}; now "
                f"{after.store_chunks} of {after.expected_chunks} chunks, {left}"
            )
        out.append(f"checks: {self.checks.summary()}")
        out.append(f"switch: {self.switch}" + (" (history row recorded)" if self.history_recorded
                                               else ""))  # fmt: skip
        return out + [f"PROBLEM: {p}" for p in self.problems]


def reconcile(settings: Settings, dsn: str, note: str) -> ReconcileReport:
    """Re-apply the ledger to every pgvector table on `dsn`, check the store and the switch;
    `note` says what was restored (it goes into the history row)."""
    settings = replace(settings, pg_dsn=dsn)
    report = ReconcileReport()
    held: dict[str, int] = {}
    for name, generation in pg_generations(settings).items():
        with opened_backend(CANDIDATE, generation) as backend:
            try:
                repaired = repair_store(backend, generation.batches_dir, apply=True)
            except RepairRefusedError as exc:
                report.problems.append(f"{name}: {exc}")
                continue
            report.repaired[name] = repaired
            if not repaired.converged:
                report.problems.append(f"{name}: the store still differs from its ledger")
            held[name] = (repaired.after or repaired.plan).store_chunks
            check_store(backend, report.checks)
    check_indexes(dsn, report.checks)
    _check_switch(settings, held, report)
    if not report.problems:
        report.history_recorded = _record_history(settings, dsn, note)
    return report


def _check_switch(settings: Settings, held: dict[str, int], report: ReconcileReport) -> None:
    try:
        state = read_state(settings.serving_file)
    except ValueError as exc:
        report.problems.append(f"the switch is unreadable: {exc}")
        return
    report.switch = state.describe()
    if state.backend != CANDIDATE:
        return
    if not held.get(state.generation):
        report.problems.append(
            f"the switch serves {state.target} but the restored store holds no rows of it: "
            '`candlefire rollback --reason "..."` until it is rebuilt'
        )


def _record_history(settings: Settings, dsn: str, note: str) -> bool:
    """One `restored` row when the history's latest row is not the switch as it stands."""
    if not settings.serving_file.exists():
        return False
    lock = lambda: switch_lock(settings)  # noqa: E731 - the queue's lock factory
    flush(dsn, settings.serving_pending_file, lock, settings.serving_file)
    publish_switch(settings, dsn)  # the restored database holds the copy of the backup's time
    state = read_state(settings.serving_file)
    latest = next(iter(history(dsn, limit=1)), None)
    if latest is not None and _same(latest, state):
        return False
    with switch_lock(settings):
        queue_entry(settings.serving_pending_file, _restored_entry(state, note))
    return flush(dsn, settings.serving_pending_file, lock, settings.serving_file).inserted > 0


def _same(row: dict, state: ServingState) -> bool:
    """The row records this switch: its own change, or a restore's row re-recording it."""
    when = datetime.fromisoformat(state.changed_at) if state.changed_at else None
    if (row.get("state"), row.get("generation")) != (state.state, state.generation):
        return False
    return row.get("event") == RESTORED or row.get("changed_at") == when


def _restored_entry(state: ServingState, note: str) -> dict:
    entry = {**asdict(state), "backend": state.backend, "entry_id": uuid.uuid4().hex,
             "event": RESTORED, "actor": "candlefire restore",
             "changed_at": datetime.now(UTC).isoformat(),
             "reason": f"{note}: the switch re-recorded as it stands (history rows after the "
                       "restored point are lost)",
             "previous": str(state.previous) if state.previous else None,
             "retired": ",".join(sorted(state.retired)) or None}  # fmt: skip
    return {column: entry.get(column) for column in HISTORY_TABLE.columns}
