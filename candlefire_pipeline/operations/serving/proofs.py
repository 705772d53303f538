"""The evidence a store's retirement and its way back are decided on (the guards in
operations/serving/guards.py read them; operations/retirement gathers them).

A retirement needs a soak: pgvector serving the default generation, unpinned and with every
watched window passing, for CANDLEFIRE_RETIRE_SOAK_DAYS (read from the switch's history). An
unretire needs the store rebuilt from the ledger and compared with it, nothing differing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta


def parse_time(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def days_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds() / 86400


@dataclass(frozen=True)
class FailedWindow:
    """A watched window the switch counted as failing: when, and what its history row says."""

    at: str
    what: str


@dataclass(frozen=True)
class Soak:
    """The soak judged at `now`: since when pgvector has served the default generation without
    a break (None: it does not), and the failing windows counted in the last `days`."""

    days: float
    now: str
    serving_since: str | None = None
    failed: tuple[FailedWindow, ...] = ()

    @property
    def began(self) -> datetime:
        """When the soak period that ends now began."""
        return parse_time(self.now) - timedelta(days=self.days)

    def after(self, start: str) -> str:
        """When a soak that starts at `start` is over."""
        return (parse_time(start) + timedelta(days=self.days)).isoformat()


@dataclass(frozen=True)
class Rebuilt:
    """An unretire's proof: each target of the store rebuilt from its ledger and compared with
    it (chunk ids and content hashes); `differing` sums missing / orphaned / stale over them."""

    store: str
    targets: tuple[str, ...]
    batches: int
    chunks: int
    differing: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not any(self.differing.values())

    def describe(self) -> str:
        return (
            f"{self.store} rebuilt from the ledger ({self.chunks:,} chunks of {self.batches} "
            f"batches, {len(self.targets)} target(s)) and checked against it"
        )
