"""Shadow reads: which share of live requests the app-facing reader replays on the stores that
do not serve, and how the comparisons are kept and judged (docs/OPERATIONS.md: shadow reads)."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import env_bool, env_float, env_int, env_str

#: CPU priority of the shadow worker process: idle = SCHED_IDLE (only CPU nobody else wants),
#: nice = nice 19 (a small share even on a busy machine), normal = as the app.
WORKER_PRIORITIES = ("idle", "nice", "normal")

#: name -> (lowest, highest) of the integer settings, checked when the section is built
_INT_RANGES = {
    "queue_size": ("CANDLEFIRE_SHADOW_QUEUE", 1, 10_000),
    "window_minutes": ("CANDLEFIRE_SHADOW_WINDOW_MINUTES", 5, 7 * 24 * 60),
    "retention_days": ("CANDLEFIRE_SHADOW_RETENTION_DAYS", 1, 3650),
}


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
        for name, (variable, low, high) in _INT_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"{variable} must be between {low} and {high}, got {value!r}")

    @property
    def enabled(self) -> bool:
        return self.rate > 0.0

    @classmethod
    def from_env(cls) -> ShadowSettings:
        return cls(
            rate=env_float("CANDLEFIRE_SHADOW_RATE", cls.rate),
            keep_text=env_bool("CANDLEFIRE_SHADOW_KEEP_TEXT", cls.keep_text),
            queue_size=env_int("CANDLEFIRE_SHADOW_QUEUE", cls.queue_size),
            window_minutes=env_int("CANDLEFIRE_SHADOW_WINDOW_MINUTES", cls.window_minutes),
            cron=env_str("CANDLEFIRE_SHADOW_CRON", cls.cron),
            retention_days=env_int("CANDLEFIRE_SHADOW_RETENTION_DAYS", cls.retention_days),
            priority=env_str("CANDLEFIRE_SHADOW_PRIORITY", cls.priority).lower(),
        )
