"""The shadow window (no Dagster): flush the local records, aggregate the rolling window per
(served, target), judge it with the live-evidence gates and write it beside the parity reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from candlefire_pipeline.operations.pending_rows import QueueWrite
from candlefire_pipeline.operations.retirement.view import retired_note, retired_stores
from candlefire_pipeline.operations.shadow.records import flush_records, read_records
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.parity.shadow.gates import shadow_gates
from candlefire_pipeline.parity.shadow.report import write_window
from candlefire_pipeline.parity.shadow.window import ShadowWindow, aggregate, load_latest_window
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE


@dataclass(frozen=True)
class ShadowRun:
    window: ShadowWindow
    gates: list[GateResult]
    json_path: Path
    md_path: Path
    plots: dict[str, str]  # kind -> PNG file name beside the markdown
    flushed: QueueWrite


def run_shadow_window(
    settings: Settings, dsn: str | None, now: datetime | None = None
) -> ShadowRun:
    """The window ending now: local records flushed first (they stay local if Postgres is
    down, and the window is then computed from them alone, which it says)."""
    now = now or datetime.now(UTC)
    shadow = settings.shadow
    flushed = flush_records(dsn, settings.shadow_pending_file, shadow.retention_days, now)
    since = now - timedelta(minutes=shadow.window_minutes)
    records, note = read_records(dsn, settings.shadow_pending_file, since)
    window = aggregate(records, since, now, shadow.window_minutes, note or flushed.warning)
    gates = _gates(settings, window, now)
    json_path, md_path, plots = write_window(window, gates, settings.reports_dir)
    return ShadowRun(window, gates, json_path, md_path, plots, flushed)


def latest_shadow_evaluation(
    settings: Settings, now: datetime | None = None
) -> tuple[ShadowWindow | None, list[GateResult]]:
    """The newest window on disk and its live-evidence gates evaluated now."""
    window = load_latest_window(settings.reports_dir)
    return window, _gates(settings, window, now)


def _gates(settings: Settings, window: ShadowWindow | None, now: datetime | None):
    """The live gates of the reference/candidate pair; with the reference retired, they say
    that nothing can be judged live (no shadow read is offered it)."""
    retirement = retired_stores(settings).get(REFERENCE)
    retired = retired_note(REFERENCE, retirement) if retirement else None
    return shadow_gates(window, settings.parity, REFERENCE, CANDIDATE, now, retired=retired)
