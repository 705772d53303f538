"""`candlefire maintain`: the index health of every fed store, and what to do about it.

pgvector: dead tuples, last (auto)vacuum, index sizes with a bloat estimate (backends/pg/health:
the same index built on a sample of the live rows); VACUUM when dead tuples pass
VACUUM_DEAD_RATIO, and `REINDEX INDEX CONCURRENTLY` when an HNSW or GIN index passes
REINDEX_BLOAT. Chroma and Qdrant: what their APIs expose (counts, index settings, optimizer
state; Chroma's `chroma vacuum` runs offline only). A dry run by default; `apply` runs the
pgvector actions, none of which blocks a read or a write (docs/BENCHMARKS.md: retrieve() during
a concurrent REINDEX).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg import health as pg_health
from candlefire_pipeline.backends.pg import phrase as pg_phrase
from candlefire_pipeline.backends.pg.terms.summary import summarize
from candlefire_pipeline.operations.retirement.view import retired_note, retired_stores
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CHROMA, PGVECTOR, QDRANT

log = logging.getLogger(__name__)

#: Index bytes over a fresh build's above which the index is rebuilt. The churn soak's goal
#: bound (docs/BENCHMARKS.md): past it the graph carries more dead weight than a fresh build.
REINDEX_BLOAT = 1.5
#: Dead / live tuples above which the table is vacuumed (autovacuum's own default trigger is
#: 0.2 of the table plus 50 rows: past it autovacuum is behind).
VACUUM_DEAD_RATIO = 0.2
REBUILT_METHODS = ("hnsw", "gin")
#: Share of the table a write must change before it checks the trigram GIN itself (gin_upkeep):
#: smaller writes are left to the weekly store_maintenance, so a trickle pays nothing.
UPKEEP_MIN_SHARE = 0.02
#: Bytes over a fresh build below which that check rebuilds nothing: a small table's GIN keeps
#: the pages its emptied pending list took (up to gin_pending_list_limit, 4 MB), so the demo's
#: 651 chunks read 9x a fresh build; rebuilding that after every write buys nothing.
UPKEEP_MIN_EXCESS_BYTES = 16 * 2**20
MB = 2**20


@dataclass
class Action:
    store: str
    kind: str  # "vacuum" | "reindex" | "build" (the phrase index)
    target: str  # the table or index
    reason: str
    done: bool = False
    seconds: float | None = None
    error: str | None = None


@dataclass
class StoreHealth:
    store: str
    figures: dict[str, object] = field(default_factory=dict)  # flat: metadata, JSON, the CLI
    notes: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    error: str | None = None


@dataclass
class MaintenanceReport:
    checked_at: str
    applied: bool
    stores: list[StoreHealth]

    @property
    def actions(self) -> list[Action]:
        return [a for s in self.stores for a in s.actions]

    @property
    def failed(self) -> bool:
        return any(s.error for s in self.stores) or any(a.error for a in self.actions)

    def to_dict(self) -> dict:
        return asdict(self)


def pgvector_health(backend) -> StoreHealth:
    """The pgvector table's statistics, sizes and bloat estimates, and the actions they call for."""
    out = StoreHealth("pgvector")
    health = pg_health.table_health(backend.conn, backend.names.table)
    if health is None:
        out.notes.append(f"table {backend.names.table} does not exist yet: nothing to maintain")
        return out
    pg_health.estimate_fresh_sizes(backend.conn, health)
    out.figures = _pg_figures(health)
    cache = summarize(backend.conn, backend.names)
    if cache is not None:
        out.figures |= cache.metadata()
        if not cache.valid:
            out.notes.append(f"{cache.describe()}: a write bypassed the store")
    if health.dead_ratio > VACUUM_DEAD_RATIO:
        out.actions.append(Action("pgvector", "vacuum", health.table, (
            f"{health.dead_tuples:,} dead tuples = {health.dead_ratio:.2f} of the live ones"
            f" (> {VACUUM_DEAD_RATIO}); last autovacuum {_when(health.last_autovacuum)}"
        )))  # fmt: skip
    for index in health.indexes:
        if not index.valid:
            out.notes.append(f"index {index.name} is INVALID (a failed concurrent build?)")
        elif index.method in REBUILT_METHODS and (index.bloat or 0) > REINDEX_BLOAT:
            out.actions.append(_reindex(index))
    if (state := backend.phrase_state()) in ("absent", "invalid"):
        out.actions.append(Action("pgvector", "build", f"{backend.names.table} phrase index", (
            f"the phrase index is {state}: cold probes of rare phrases read the trigram index"
        )))  # fmt: skip
    return out


def _reindex(index: pg_health.IndexHealth) -> Action:
    return Action("pgvector", "reindex", index.name, (
        f"{index.bytes / MB:.1f} MB = {index.bloat:.2f}x the"
        f" {index.fresh_bytes / MB:.1f} MB a fresh build would take (> {REINDEX_BLOAT}x)"
    ))  # fmt: skip


def gin_upkeep(backend, rows_changed: int, live_rows: int) -> StoreHealth:
    """After a write of `rows_changed` rows (written + deleted) to a table now holding
    `live_rows` (counted: the statistics views lag a just-committed write): the trigram GIN's
    bloat, and `REINDEX INDEX CONCURRENTLY` past REINDEX_BLOAT; a note says why a write was not
    checked.

    Replace-by-paper grows the GIN fast and for good: the churn soak measured 1.69x a fresh
    build after 7 drops of 20% of the papers and 1.97x after 14, while pgvector reuses the HNSW
    slots vacuum frees (1.40x, flat). A weekly check lets the GIN double between two runs.
    """
    out = StoreHealth("pgvector")
    health = pg_health.table_health(backend.conn, backend.names.table)
    if health is None or health.trigram_index() is None:
        out.notes.append("no trigram index")
        return out
    health.live_tuples = live_rows
    if rows_changed < UPKEEP_MIN_SHARE * max(health.live_tuples, 1):
        out.notes.append(f"under {UPKEEP_MIN_SHARE:.0%} of the table changed")
        return out
    index = health.trigram_index()
    pg_health.estimate_fresh_sizes(backend.conn, health, methods=("gin",), only=index)
    out.figures = {"gin_bytes": index.bytes, "gin_bloat": _rounded(index.bloat)}
    if index.bloat is None:
        out.notes.append("too few rows to estimate")
    elif not index.valid:
        out.notes.append(f"index {index.name} is INVALID (a failed concurrent build?)")
    elif index.bloat > REINDEX_BLOAT and index.bytes - index.fresh_bytes < UPKEEP_MIN_EXCESS_BYTES:
        out.notes.append(
            f"{index.bloat:.2f}x a fresh build, but {(index.bytes - index.fresh_bytes) / MB:.1f} MB"
            f" over it: under the {UPKEEP_MIN_EXCESS_BYTES / MB:.0f} MB a rebuild is worth"
        )
    elif index.bloat > REINDEX_BLOAT:
        action = _reindex(index)
        apply_action(backend, action)
        out.actions.append(action)
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "never"


def _pg_figures(health: pg_health.TableHealth) -> dict[str, object]:
    figures: dict[str, object] = {
        "live_tuples": health.live_tuples,
        "dead_tuples": health.dead_tuples,
        "dead_ratio": round(health.dead_ratio, 4),
        "heap_bytes": health.heap_bytes,
        "last_vacuum": _when(health.last_vacuum),
        "last_autovacuum": _when(health.last_autovacuum),
        "vacuums": health.vacuum_count,
        "autovacuums": health.autovacuum_count,
    }
    for index in health.indexes:
        label = "phrase_gin" if pg_phrase.DOC_KEYS in index.definition else index.method
        figures[f"{label}_bytes"] = index.bytes
        if index.bloat is not None:
            figures[f"{label}_bloat"] = round(index.bloat, 3)
    return figures


def chroma_health(backend) -> StoreHealth:
    """What Chroma's API shows: the count, the HNSW settings, the folder size (local mode)."""
    collection = backend._collection
    hnsw = (collection.configuration_json or {}).get("hnsw") or {}
    out = StoreHealth("chroma", {"chunks": collection.count()})
    out.figures.update({f"hnsw_{k}": v for k, v in hnsw.items() if v is not None})
    path = getattr(backend, "_where", "")
    if path and Path(path).is_dir():
        out.figures["folder_bytes"] = sum(
            f.stat().st_size for f in Path(path).rglob("*") if f.is_file()
        )
        out.notes.append(
            "Chroma's API has no online compaction; `chroma vacuum --path "
            f"{path}` shrinks the folder with every client stopped"
        )
    return out


def qdrant_health(backend) -> StoreHealth:
    """What Qdrant's API shows: status, optimizer state, points vs indexed vectors, segments."""
    if not backend._exists():
        return StoreHealth("qdrant", notes=[f"collection {backend.collection} does not exist yet"])
    with backend._guard:
        info = backend._client.get_collection(backend.collection)
    out = StoreHealth("qdrant", {
        "status": str(getattr(info.status, "value", info.status)),
        "optimizer_status": str(getattr(info.optimizer_status, "value", info.optimizer_status)),
        "points": info.points_count, "indexed_vectors": info.indexed_vectors_count,
        "segments": info.segments_count,
        "deleted_threshold": info.config.optimizer_config.deleted_threshold,
    })  # fmt: skip
    out.notes.append("Qdrant vacuums and re-indexes segments itself (its optimizers)")
    return out


CHECKS: dict[str, Callable] = {
    PGVECTOR: pgvector_health, CHROMA: chroma_health, QDRANT: qdrant_health,
}  # fmt: skip


def apply_action(backend, action: Action) -> None:
    """Run one pgvector action on the backend's (autocommit) connection; failures recorded."""
    started = time.perf_counter()
    try:
        if action.kind == "vacuum":
            pg_health.vacuum(backend.conn, action.target)
        elif action.kind == "build":
            backend.build_phrase_index()
        else:
            pg_health.reindex_concurrently(backend.conn, action.target)
        action.done = True
        log.warning("maintain: %s %s done (%s)", action.kind, action.target, action.reason)
    except Exception as exc:  # one failed action is reported, not fatal
        action.error = f"{type(exc).__name__}: {exc}"
        log.warning("maintain: %s %s failed: %s", action.kind, action.target, action.error)
    action.seconds = round(time.perf_counter() - started, 2)


def maintain(
    settings: Settings,
    apply: bool = False,
    open_store: Callable[[str], AbstractContextManager] | None = None,
) -> MaintenanceReport:
    """Every fed store's health; with apply, the pgvector actions run (then health again).

    open_store(name) opens a store as a context manager (default: from settings; the Dagster
    asset passes its resources')."""
    open_store = open_store or (lambda name: opened_backend(name, settings))
    report = MaintenanceReport(datetime.now(UTC).isoformat(), apply, [])
    retired = retired_stores(settings)
    for store in settings.stores:
        if store in retired:  # not opened: nothing is written to it, its files may be gone
            note = retired_note(store, retired[store])
            report.stores.append(StoreHealth(store, notes=[f"{note}: not checked"]))
            continue
        try:
            with open_store(store) as backend:
                report.stores.append(_maintain_one(store, backend, apply))
        except Exception as exc:  # an unreachable store is reported as such
            report.stores.append(StoreHealth(store, error=f"{type(exc).__name__}: {exc}"))
    return report


def _maintain_one(store: str, backend, apply: bool) -> StoreHealth:
    health = CHECKS[store](backend)
    if apply and health.actions:
        for action in health.actions:
            apply_action(backend, action)
        after = CHECKS[store](backend).figures
        health.figures = {**health.figures, **{f"after_{k}": v for k, v in after.items()}}
    return health


def _action_line(action: Action, applied: bool) -> str:
    if action.error:
        state = f"FAILED ({action.error})"
    elif action.done:
        state = f"done in {action.seconds:.1f} s"
    else:
        state = "to do (--apply runs it)" if not applied else "not run"
    return f"  {action.kind} {action.target}: {action.reason} - {state}"


def format_maintenance(report: MaintenanceReport) -> str:
    """What `candlefire maintain` prints: per store its figures, notes and actions."""
    lines = [
        f"store maintenance ({'applied' if report.applied else 'dry run'}, {report.checked_at})"
    ]
    for health in report.stores:
        if health.error:
            lines.append(f"{health.store}: UNREACHABLE - {health.error}")
            continue
        shown = ", ".join(f"{k} {v}" for k, v in health.figures.items())
        lines.append(f"{health.store}: {shown or 'no figures'}")
        lines += [f"  note: {note}" for note in health.notes]
        lines += [_action_line(a, report.applied) for a in health.actions]
        if not health.actions:
            lines.append("  nothing to do")
    return "\n".join(lines)


def actions_markdown(report: MaintenanceReport) -> str:
    """The actions as a Markdown table (the asset's metadata)."""
    rows = ["| store | action | target | reason | result |", "|---|---|---|---|---|"]
    for a in report.actions:
        result = a.error or (f"done in {a.seconds:.1f} s" if a.done else "dry run")
        rows.append(f"| {a.store} | {a.kind} | {a.target} | {a.reason} | {result} |")
    return "\n".join(rows) if report.actions else "Nothing to do."
