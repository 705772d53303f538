"""`candlefire repair`: reconcile one store with the ledger's current versions.

The ledger view of a store is every batch recorded as applied to it plus every batch whose
apply was interrupted (`applying-<store>.json`): what the store holds once those finish. A
chunk the view expects and the store lacks is missing; one whose content hash differs is stale;
one the view does not know is orphaned. A dry run (the default) only reports; `apply` finishes
the interrupted batches, rewrites each paper whose chunks differ from the batch that holds its
current version (replace by paper also drops its orphans), deletes papers with no live version,
and reports what remains (nothing, unless the store changed meanwhile).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.corpus.ledger import StoreLedger, diff_inventory, live_papers
from candlefire_pipeline.operations.indexing import read_store_rows, resume_interrupted

log = logging.getLogger(__name__)

#: Ids listed per kind in the text report.
SHOWN = 5


class RepairRefusedError(RuntimeError):
    """Applying the plan would do harm the ledger cannot justify (e.g. delete a whole store)."""


@dataclass
class RepairPlan:
    """What differs between a store and its ledger view, and the writes that fix it."""

    store: str
    batches: list[str]
    interrupted: list[str]
    expected_chunks: int
    store_chunks: int
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    #: batch key -> pmids to write from that batch (their current version lives there)
    rewrite: dict[str, list[str]] = field(default_factory=dict)
    #: pmids the store holds that have no live version in the view
    delete: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.missing or self.stale or self.orphaned or self.interrupted)

    @property
    def counts(self) -> dict[str, int]:
        return {"missing": len(self.missing), "stale": len(self.stale),
                "orphaned": len(self.orphaned)}  # fmt: skip


@dataclass
class RepairReport:
    plan: RepairPlan
    applied: bool = False
    resumed: list[str] = field(default_factory=list)
    papers_rewritten: int = 0
    rows_written: int = 0
    papers_deleted: int = 0
    chunks_deleted: int = 0
    #: the diff counted again after applying (None for a dry run)
    after: RepairPlan | None = None

    @property
    def converged(self) -> bool:
        return (self.after or self.plan).clean


def plan_repair(
    backend: VectorBackend, batches_dir: Path, view: list[str] | None = None
) -> RepairPlan:
    """Compare the store with its ledger view (default: its applied and interrupted batches;
    `view`: exactly those batches); write nothing."""
    ledger = StoreLedger(batches_dir, backend.name)
    interrupted = ledger.interrupted() if view is None else []
    batches = sorted(set(ledger.applied()) | set(interrupted)) if view is None else sorted(view)
    live = live_papers(batches_dir, batches)
    held = backend.paper_chunks()
    expected = {cid: h for _, chunks in live.values() for cid, h in chunks.items()}
    actual = {cid: h for chunks in held.values() for cid, h in chunks.items()}
    diff = diff_inventory(expected, actual)
    plan = RepairPlan(
        store=backend.name,
        batches=batches,
        interrupted=interrupted,
        expected_chunks=len(expected),
        store_chunks=len(actual),
        missing=diff.missing,
        stale=diff.stale,
        orphaned=diff.orphaned,
        delete=sorted(held.keys() - live.keys()),
    )
    for pmid, (batch_key, chunks) in sorted(live.items()):
        if held.get(pmid) != chunks:
            plan.rewrite.setdefault(batch_key, []).append(pmid)
    return plan


def repair_store(
    backend: VectorBackend, batches_dir: Path, apply: bool = False, view: list[str] | None = None
) -> RepairReport:
    """Report (and with apply, fix) the store's missing, stale and orphaned chunks; `view` as
    plan_repair's (a given view leaves interrupted applies to the caller)."""
    plan = plan_repair(backend, batches_dir, view)
    report = RepairReport(plan=plan)
    if not apply or plan.clean:
        return report
    if not plan.batches and plan.store_chunks:
        raise RepairRefusedError(
            f"no batch under {batches_dir} is recorded as applied to {backend.name}, which "
            f"holds {plan.store_chunks} chunks: refusing to delete them all (is "
            "CANDLEFIRE_DATA_DIR the store's data directory?)"
        )
    report.applied = True
    if view is None:
        report.resumed = resume_interrupted(backend, batches_dir, model=None)
    todo = plan_repair(backend, batches_dir, view) if report.resumed else plan
    for batch_key, pmids in todo.rewrite.items():
        rows = read_store_rows(Path(batches_dir) / batch_key, batch_key)
        keep = pc.is_in(rows["pmid"], value_set=pa.array(pmids, pa.string()))
        report.rows_written += backend.replace_papers(rows.filter(keep))
        report.papers_rewritten += len(pmids)
    if todo.delete:
        report.chunks_deleted = backend.delete_papers(todo.delete)
        report.papers_deleted = len(todo.delete)
    report.after = plan_repair(backend, batches_dir, view)
    log.info(
        "repaired %s: %d papers rewritten, %d deleted, %d batches resumed",
        backend.name, report.papers_rewritten, report.papers_deleted, len(report.resumed),
    )  # fmt: skip
    return report


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return f"{shown}, ... ({len(ids) - SHOWN} more)" if len(ids) > SHOWN else shown


def _plan_lines(plan: RepairPlan) -> list[str]:
    lines = [
        f"ledger view: {len(plan.batches)} batches, {plan.expected_chunks} chunks expected; "
        f"store holds {plan.store_chunks}"
    ]
    if plan.interrupted:
        lines.append(f"interrupted applies: {', '.join(plan.interrupted)}")
    for kind, ids in (("missing", plan.missing), ("stale", plan.stale),
                      ("orphaned", plan.orphaned)):  # fmt: skip
        lines.append(f"{kind}: {len(ids)}" + (f" ({_ids(ids)})" if ids else ""))
    papers = sum(len(p) for p in plan.rewrite.values())
    lines.append(f"papers to rewrite: {papers}; papers to delete: {len(plan.delete)}")
    if not plan.batches and plan.store_chunks:
        lines.append("no batch is recorded as applied to this store: --apply refuses to run")
    return lines


def format_repair(report: RepairReport) -> str:
    """The operator's report: the diff, and what was done about it."""
    plan = report.plan
    mode = "applied" if report.applied else "dry run"
    lines = [f"repair {plan.store} ({mode})", *(f"  {line}" for line in _plan_lines(plan))]
    if report.applied and report.after is not None:
        lines.append(
            f"  done: {len(report.resumed)} interrupted batches finished, "
            f"{report.papers_rewritten} papers rewritten ({report.rows_written} chunks), "
            f"{report.papers_deleted} papers deleted ({report.chunks_deleted} chunks)"
        )
        remaining = ", ".join(f"{k} {v}" for k, v in report.after.counts.items())
        lines.append(f"  after: {remaining}" + ("" if report.converged else "  (NOT converged)"))
    elif plan.clean:
        lines.append("  the store matches the ledger: nothing to do")
    else:
        lines.append("  run again with --apply to fix it")
    return "\n".join(lines)
