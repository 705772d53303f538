"""Progress of long work at a steady interval: done / total, rate and ETA, final figures."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: Seconds between two progress messages; the first and the last are always reported.
DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ProgressFigures:
    done: int
    total: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        if self.done >= self.total:
            return 0.0
        return (self.total - self.done) / self.rate if self.rate > 0 else None


def describe(what: str, unit: str, figures: ProgressFigures) -> str:
    """E.g. 'pgvector load: 12288/62196 rows (20%), 3100 rows/s, ETA 16 s'."""
    share = 100.0 * figures.done / figures.total if figures.total else 100.0
    eta = figures.eta_seconds
    eta_text = "ETA unknown" if eta is None else f"ETA {eta:.0f} s"
    return (
        f"{what}: {figures.done}/{figures.total} {unit} ({share:.0f}%), "
        f"{figures.rate:.0f} {unit}/s, {eta_text}"
    )


class ProgressMeter:
    """Feed it the running count; it reports through `emit` at most every `interval_s` seconds."""

    def __init__(
        self,
        what: str,
        total: int,
        emit: Callable[[str], None],
        *,
        unit: str = "rows",
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        self.what, self.total, self.unit = what, total, unit
        self._emit, self._interval, self._clock = emit, interval_s, clock
        self._started = clock()
        self._last_emit: float | None = None
        self._last_done = 0
        self.done = 0
        self.reports = 0

    def figures(self) -> ProgressFigures:
        return ProgressFigures(self.done, self.total, self._clock() - self._started)

    def update(self, done: int) -> None:
        """The running count (never decreasing); reports when the interval has passed."""
        self.done = max(self.done, min(int(done), self.total))
        now = self._clock()
        if self._last_emit is None or now - self._last_emit >= self._interval:
            self._report(now)

    def finish(self) -> ProgressFigures:
        """Report the final figures once (unless the last report already said them)."""
        figures = self.figures()
        if self.reports == 0 or self._last_done != self.done:
            self._report(self._clock())
        return figures

    def _report(self, now: float) -> None:
        self._last_emit, self._last_done = now, self.done
        self.reports += 1
        self._emit(describe(self.what, self.unit, self.figures()))
