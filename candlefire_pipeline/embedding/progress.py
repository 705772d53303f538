"""Progress of a long stage (done / total, rate, ETA) reported at a steady time interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One progress reading; `final` is the reading at the end of the stage."""

    label: str
    done: int
    total: int
    #: rows whose vector was reused (cache or an identical chunk earlier in the stage)
    reused: int
    seconds: float
    final: bool = False

    @property
    def rate(self) -> float:
        """Rows per second so far."""
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far; None before there is a rate."""
        if self.done >= self.total:
            return 0.0
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def message(self) -> str:
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        text = f"{self.label}: {self.done:,}/{self.total:,}{share}, {self.reused:,} cached"
        text += f", {self.rate:,.0f}/s"
        if self.final:
            return f"{text}, done in {_duration(self.seconds)}"
        eta = self.eta_seconds
        return f"{text}, ETA {_duration(eta) if eta is not None else 'unknown'}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class ProgressTracker:
    """Calls `report(message)` at most every `interval` seconds, and once at `finish()`."""

    def __init__(
        self,
        label: str,
        total: int,
        report: Callable[[str], None] | None,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"progress interval must be > 0 seconds, got {interval}")
        self.label, self.total, self.interval = label, total, interval
        self._report, self._clock = report, clock
        self._started = self._last = clock()
        self.done = self.reused = 0
        self.reports = 0

    def reading(self, final: bool = False) -> Progress:
        seconds = self._clock() - self._started
        return Progress(self.label, self.done, self.total, self.reused, seconds, final)

    def _emit(self, reading: Progress) -> None:
        self.reports += 1
        if self._report is not None:
            self._report(reading.message())

    def advance(self, rows: int, reused: int = 0) -> None:
        """Count `rows` more rows (`reused` of them not computed); report if the interval passed."""
        self.done += rows
        self.reused += reused
        now = self._clock()
        if now - self._last >= self.interval and self.done < self.total:
            self._last = now
            self._emit(self.reading())

    def finish(self) -> Progress:
        """Report and return the final reading."""
        reading = self.reading(final=True)
        self._emit(reading)
        return reading
