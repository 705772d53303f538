"""Shadow reads: which share of live requests the app-facing reader replays on the stores that
do not serve, and how the comparisons are kept and judged (docs/OPERATIONS.md: shadow reads)."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import env_fields

#: CPU priority of the shadow worker process: idle = SCHED_IDLE (only CPU nobody else wants),
#: nice = nice 19 (a small share even on a busy machine), normal = as the app.
WORKER_PRIORITIES = ("idle", "nice", "normal")

#: field -> the variable it is read from
_VARIABLES = {
    "rate": "CANDLEFIRE_SHADOW_RATE",
    "keep_text": "CANDLEFIRE_SHADOW_KEEP_TEXT",
    "queue_size": "CANDLEFIRE_SHADOW_QUEUE",
    "window_minutes": "CANDLEFIRE_SHADOW_WINDOW_MINUTES",
    "cron": "CANDLEFIRE_SHADOW_CRON",
    "retention_days": "CANDLEFIRE_SHADOW_RETENTION_DAYS",
    "priority": "CANDLEFIRE_SHADOW_PRIORITY",
}
#: field -> (lowest, highest) of the integer settings, checked when the section is built
_INT_RANGES = {"queue_size": (1, 10_000), "window_minutes": (5, 7 * 24 * 60),
               "retention_days": (1, 3650)}  # fmt: skip


@dataclass(frozen=True)
class ShadowSettings:
    #: share of served requests replayed on the shadow targets (0 = off, 1 = every request)
    rate: float = 0.0
    #: keep the query's text (and entity names and terms) in each record; else only its hash
    keep_text: bool = False
    #: replays waiting for the worker; a full queue drops the replay (counted)
    queue_size: int = 64
    #: the rolling window shadow_parity aggregates, and how often it does (cron, UTC)
    window_minutes: int = 60
    cron: str = "*/15 * * * *"
    #: records older than this are deleted (Postgres) or dropped (the local pending file)
    retention_days: int = 14
    #: the worker's CPU priority (WORKER_PRIORITIES); docs/BENCHMARKS.md compares them
    priority: str = "idle"

    def __post_init__(self) -> None:
        # NaN fails both comparisons, so it is refused too
        if isinstance(self.rate, bool) or not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"CANDLEFIRE_SHADOW_RATE must be between 0 and 1, got {self.rate!r}")
        if self.priority not in WORKER_PRIORITIES:
            raise ValueError(
                f"CANDLEFIRE_SHADOW_PRIORITY must be one of {', '.join(WORKER_PRIORITIES)}, "
                f"got {self.priority!r}"
            )
        for name, (low, high) in _INT_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not low <= value <= high:
                raise ValueError(
                    f"{_VARIABLES[name]} must be between {low} and {high}, got {value!r}"
                )

    @property
    def enabled(self) -> bool:
        return self.rate > 0.0

    @classmethod
    def from_env(cls) -> ShadowSettings:
        return cls(**env_fields(cls, _VARIABLES, {"priority": WORKER_PRIORITIES}))
