"""How the Dagster layer runs: backfill grouping, the run executor, the drop sensor's pace."""

from __future__ import annotations

from candlefire_pipeline.settings.env import env_choice, env_int, env_positive_int

#: A backfill groups up to this many drop files into one run (BackfillPolicy.multi_run).
DEFAULT_BACKFILL_PARTITIONS_PER_RUN = 10


def backfill_partitions_per_run() -> int:
    """CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN: drop files one backfill run may take (default 10)."""
    return env_positive_int(
        "CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN", DEFAULT_BACKFILL_PARTITIONS_PER_RUN
    )


def executor_mode() -> tuple[str, int]:
    """("in_process" | "multiprocess", max_concurrent): in-process costs ~7 s less per step here."""
    mode = env_choice("CANDLEFIRE_RUN_EXECUTOR", "in_process", ("in_process", "multiprocess"))
    return mode, env_int("CANDLEFIRE_RUN_MAX_CONCURRENT", 2)


def sensor_interval_seconds() -> int:
    """How often the drop sensor looks; a drop is picked up on the second look that sees it."""
    return env_int("CANDLEFIRE_SENSOR_INTERVAL", 30)
