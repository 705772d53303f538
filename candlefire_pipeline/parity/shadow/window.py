"""A rolling window of shadow comparisons, aggregated per (served store, shadow target).

Pure: records in, figures out (the shadow_parity asset reads the records and writes the window
beside the parity reports). Agreement is computed over the comparisons that succeeded; a failed
shadow read counts in the error rate, never as agreement.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from candlefire_pipeline.parity import metrics

WINDOW_GLOB = "shadow-*.json"
#: Comparisons listed as the worst divergences of a target (lowest overlap first).
WORST_LISTED = 10
#: Values per list kept in the window for its plots (evenly spaced); figures use them all.
PLOT_VALUES = 5_000


@dataclass
class TargetWindow:
    """One (served, target) pair over the window."""

    served: str
    target: str
    samples: int  # comparisons recorded (errors included)
    compared: int  # comparisons whose shadow read succeeded
    errors: int
    mean_overlap: float | None = None
    min_overlap: float | None = None
    grounding_agreement: float | None = None
    keyword_agreement: float | None = None
    served_p95_ms: float | None = None
    shadow_p95_ms: float | None = None
    divergences_by_kind: dict[str, int] = field(default_factory=dict)
    #: the lowest-overlap comparisons: query (hash, text if kept), overlap, traced causes
    worst: list[dict] = field(default_factory=list)
    #: per comparison (at most PLOT_VALUES, evenly spaced), for the plots: overlaps; ms
    overlaps: list[float] = field(default_factory=list)
    served_ms: list[float] = field(default_factory=list)
    shadow_ms: list[float] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return self.errors / self.samples if self.samples else 0.0

    @property
    def p95_ratio(self) -> float | None:
        """Shadow p95 / served p95 of the whole retrieve() (shadow reads run at idle priority,
        so this is an upper bound of the target's own speed)."""
        if not self.served_p95_ms or self.shadow_p95_ms is None:
            return None
        return self.shadow_p95_ms / self.served_p95_ms

    @property
    def pair(self) -> str:
        return f"{self.served} -> {self.target}"


@dataclass
class ShadowWindow:
    window_id: str
    created_at: str
    since: str
    until: str
    window_minutes: int
    targets: list[TargetWindow]
    note: str | None = None  # e.g. Postgres unreachable: local records only

    def target(self, served: str, target: str) -> TargetWindow | None:
        return next((t for t in self.targets if (t.served, t.target) == (served, target)), None)

    def between(self, a: str, b: str) -> TargetWindow | None:
        """The window of the pair in either direction (the one with more comparisons)."""
        found = [t for t in self.targets if {t.served, t.target} == {a, b}]
        return max(found, key=lambda t: t.compared, default=None)

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> ShadowWindow:
        values = dict(data)
        values["targets"] = [TargetWindow(**t) for t in data["targets"]]
        return cls(**values)


def aggregate(
    records: Iterable, since: datetime, until: datetime, window_minutes: int,
    note: str | None = None,
) -> ShadowWindow:  # fmt: skip
    """Every (served, target) pair's figures over the records (ShadowRecord-like objects)."""
    pairs: dict[tuple[str, str], list] = {}
    for record in records:
        pairs.setdefault((record.served_store, record.shadow_store), []).append(record)
    created = until
    return ShadowWindow(
        window_id=created.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8],
        created_at=created.isoformat(),
        since=since.isoformat(),
        until=until.isoformat(),
        window_minutes=window_minutes,
        targets=[_target(served, target, rows) for (served, target), rows in sorted(pairs.items())],
        note=note,
    )


def _target(served: str, target: str, rows: Sequence) -> TargetWindow:
    ok = [r for r in rows if r.error is None and r.overlap is not None]
    window = TargetWindow(served, target, len(rows), len(ok), len(rows) - len(ok))
    if not ok:
        return window
    overlaps = [float(r.overlap) for r in ok]
    served_ms = [float(r.served_ms) for r in ok]
    shadow_ms = [float(r.shadow_ms) for r in ok]
    window.mean_overlap = metrics.mean(overlaps)
    window.min_overlap = min(overlaps)
    window.grounding_agreement = metrics.mean([float(bool(r.grounding_equal)) for r in ok])
    window.keyword_agreement = metrics.mean([float(bool(r.keyword_equal)) for r in ok])
    window.served_p95_ms = metrics.p95(served_ms)
    window.shadow_p95_ms = metrics.p95(shadow_ms)
    step = -(-len(ok) // PLOT_VALUES)  # ceil: the window file stays small however busy
    window.overlaps, window.served_ms = overlaps[::step], served_ms[::step]
    window.shadow_ms = shadow_ms[::step]
    kinds = [d.get("kind", "other") for r in ok for d in r.divergences]
    window.divergences_by_kind = {k: kinds.count(k) for k in sorted(set(kinds))}
    window.worst = [_worst(r) for r in _worst_first(ok)[:WORST_LISTED]]
    return window


def _worst_first(rows: Sequence) -> list:
    diverging = [r for r in rows if r.divergences or r.overlap < 1.0 or not r.grounding_equal]
    return sorted(diverging, key=lambda r: (r.overlap, bool(r.grounding_equal), r.recorded_at))


def _worst(record) -> dict:
    return {
        "recorded_at": record.recorded_at,
        "query": record.query_text or f"sha256:{record.query_hash[:16]}",
        "overlap": record.overlap,
        "grounding_equal": record.grounding_equal,
        "keyword_equal": record.keyword_equal,
        "causes": sorted({d.get("kind", "other") for d in record.divergences}),
        "divergences": record.divergences[:10],
    }


def window_paths(reports_dir: Path) -> list[Path]:
    return sorted(Path(reports_dir).glob(WINDOW_GLOB)) if Path(reports_dir).is_dir() else []


def load_latest_window(reports_dir: Path) -> ShadowWindow | None:
    """The newest window in reports_dir (ids start with a UTC timestamp), or None."""
    paths = window_paths(reports_dir)
    if not paths:
        return None
    return ShadowWindow.from_dict(json.loads(paths[-1].read_text(encoding="utf-8")))
