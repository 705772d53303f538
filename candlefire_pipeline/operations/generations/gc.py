"""`candlefire generation gc [--apply]`: drop the generations nobody can need any more.

Kept: the default generation (the pipeline's own assets feed it), the one that serves, the
rollback target, and any generation younger than the retention period (counted from its
creation or the last time it served, whichever is later). A drop is recorded `dropping` under
the switch lock (so no promotion can race it: a promotion needs a live generation), then its
table, collections and files go, then it is recorded `dropped`; an interrupted drop is finished
by the next `gc --apply`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.generations.batches import remove_files
from candlefire_pipeline.generations.identity import DROPPED, DROPPING, Generation
from candlefire_pipeline.generations.registry import (
    Registry,
    registry_lock,
    stored_registry,
    write_registry,
)
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.lifecycle import SERVING, roles
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.operations.serving.machine import switch_lock
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class GcPlan:
    retention_days: float
    drop: list[tuple[Generation, str]] = field(default_factory=list)
    keep: list[tuple[Generation, str]] = field(default_factory=list)


def _age_from(generation: Generation) -> datetime | None:
    stamps = [s for s in (generation.created_at, generation.last_served_at) if s]
    return max(datetime.fromisoformat(s) for s in stamps) if stamps else None


def why_kept(generation: Generation, role: str, now: datetime, retention_days: float) -> str | None:
    """Why gc must keep this live generation, or None when it may go."""
    if generation.default:
        return "the default generation (the pipeline's own assets feed it)"
    if role:
        return "serving" if role == SERVING else "the rollback target"
    since = _age_from(generation)
    if since is None:
        return "no creation time recorded"
    if now - since < timedelta(days=retention_days):
        age = (now - since).total_seconds() / 86400
        return f"younger than {retention_days:g} days ({age:.1f} days since created or served)"
    return None


def plan_gc(settings: Settings, retention_days: float, now: datetime | None = None) -> GcPlan:
    """What `gc --apply` would drop and why every other generation stays (writes nothing)."""
    now = now or datetime.now(UTC)
    plan = GcPlan(retention_days)
    registry = stored_registry(settings)
    known = roles(settings)
    for generation in registry.generations if registry else ():
        if generation.state == DROPPED:
            continue
        if generation.state == DROPPING:
            plan.drop.append((generation, "an interrupted drop to finish"))
            continue
        reason = why_kept(generation, known.get(generation.name, ""), now, retention_days)
        if reason is None:
            plan.drop.append((generation, "neither serving nor the rollback target, and older "
                              f"than {retention_days:g} days"))  # fmt: skip
        else:
            plan.keep.append((generation, reason))
    return plan


def _mark(settings: Settings, generation: Generation, state: str, **changes) -> Generation:
    registry = stored_registry(settings)
    marked = registry.get(generation.name).with_state(state, **changes)
    write_registry(settings, Registry(registry.replaced(marked).generations, stored=True))
    return marked


def _claim(settings: Settings, generation: Generation, retention_days: float) -> Generation | None:
    """Record the drop, unless the generation became protected since the plan was made."""
    with switch_lock(settings), registry_lock(settings):
        current = stored_registry(settings).get(generation.name)
        if current.state == DROPPING:
            return current
        reason = why_kept(current, roles(settings).get(current.name, ""), datetime.now(UTC),
                          retention_days)  # fmt: skip
        if current.state != "live" or reason is not None:
            log.warning("gc: %s is kept after all: %s", current.name, reason or current.state)
            return None
        return _mark(settings, current, DROPPING)


def drop_targets(settings: Settings, generation: Generation, say: Callable[[str], None]) -> None:
    """Every written store's table / collection of the generation, then its files (a retired
    store is not opened: its folder may be gone, and goes whole with `retire --delete-files`)."""
    view = generation_settings(settings, generation)
    for store in written_stores(settings):
        backend = open_backend(store, view)
        try:
            # Chroma's reset leaves an empty collection in place; drop removes it for good
            backend.drop() if hasattr(backend, "drop") else backend.reset()
        finally:
            backend.close()
        say(f"dropped {store} target of {generation.name}")
    remove_files(settings, generation, say)


def apply_gc(settings: Settings, plan: GcPlan, say: Callable[[str], None]) -> list[str]:
    """Drop what the plan lists (re-checked under the switch lock); the names dropped."""
    dropped = []
    for generation, _ in plan.drop:
        claimed = _claim(settings, generation, plan.retention_days)
        if claimed is None:
            continue
        drop_targets(settings, claimed, say)
        with registry_lock(settings):
            _mark(settings, claimed, DROPPED, dropped_at=datetime.now(UTC).isoformat())
        dropped.append(claimed.name)
    return dropped
