"""How a promoted deployment watches itself: the auto-rollback policy, and the soak a store's
retirement waits for (docs/OPERATIONS.md: the serving switch, the soak)."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import env_fields

#: The most consecutive failing windows the auto-rollback may wait for (the state keeps as many).
MAX_ROLLBACK_WINDOWS = 100
#: CANDLEFIRE_RETIRE_SOAK_DAYS: (lowest, highest) days. Like a gate threshold, the range keeps
#: the soak from being switched off from the environment (0 would retire on no evidence).
RETIRE_SOAK_RANGE = (1.0, 365.0)
#: field -> the variable it is read from
_VARIABLES = {
    "auto_rollback": "CANDLEFIRE_AUTO_ROLLBACK",
    "rollback_windows": "CANDLEFIRE_AUTO_ROLLBACK_WINDOWS",
    "retire_soak_days": "CANDLEFIRE_RETIRE_SOAK_DAYS",
}


@dataclass(frozen=True)
class WatchSettings:
    """CANDLEFIRE_AUTO_ROLLBACK: pin Chroma after `rollback_windows` failing windows in a row
    of one source (parity reports, or shadow windows) while serving pgvector; off by default
    (a failing window then only marks the switch DEGRADED, loudly)."""

    auto_rollback: bool = False
    rollback_windows: int = 3
    #: days pgvector must have served the default generation, every watched window passing,
    #: before `candlefire retire chroma` is accepted
    retire_soak_days: float = 14.0

    def __post_init__(self) -> None:
        low, high = RETIRE_SOAK_RANGE
        soak = self.retire_soak_days
        # NaN fails both comparisons, so it is refused too
        if isinstance(soak, bool) or not (low <= soak <= high):
            raise ValueError(
                f"CANDLEFIRE_RETIRE_SOAK_DAYS (the retirement soak) must be between {low:g} and "
                f"{high:g} days, got {soak!r}"
            )
        if isinstance(self.rollback_windows, bool) or not (
            1 <= self.rollback_windows <= MAX_ROLLBACK_WINDOWS
        ):
            raise ValueError(
                f"CANDLEFIRE_AUTO_ROLLBACK_WINDOWS must be between 1 and {MAX_ROLLBACK_WINDOWS}, "
                f"got {self.rollback_windows!r}"
            )

    @property
    def rollback_after(self) -> int | None:
        """What the state machine's auto-rollback guard reads: None when it is off."""
        return self.rollback_windows if self.auto_rollback else None

    @classmethod
    def from_env(cls) -> WatchSettings:
        return cls(**env_fields(cls, _VARIABLES))
