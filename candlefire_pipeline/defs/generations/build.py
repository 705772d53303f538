"""`candlefire generation build NAME`: the generation's assets over every drop it lacks.

Dagster runs (recorded in the instance, visible in the UI) of the generation's build job, each
over a range of up to CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN drops, in the drop partitions'
order. What is left is read from the generation's own ledger every time, so the command
resumes after a kill: drops applied to every fed store are not run again, and texts embedded
before the kill are in the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack

import dagster as dg

from candlefire_pipeline.generations.batches import behind
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def build_job_name(generation: Generation) -> str:
    return f"generation_{generation.name}_build"


def remaining(settings: Settings, generation: Generation) -> list[str]:
    """Drops some fed store of the generation has not applied since they last changed."""
    lag = behind(settings, generation, written_stores(settings))
    return sorted({key for keys in lag.values() for key in keys})


def ranges(ordered: Sequence[str], wanted: set[str], per_run: int) -> list[list[str]]:
    """Runs of up to `per_run` wanted keys, each contiguous in the partitions' order (a range
    run covers every partition between its two ends)."""
    out: list[list[str]] = []
    current: list[str] = []
    for key in ordered:
        if key not in wanted:
            if current:
                out.append(current)
                current = []
            continue
        current.append(key)
        if len(current) == per_run:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def build_generation(
    settings: Settings,
    generation: Generation,
    per_run: int,
    defs: dg.Definitions,
    say: Callable[[str], None] = print,
    instance: dg.DagsterInstance | None = None,
) -> int:
    """Run the generation's build job over what its ledger lacks; 0 once nothing is left.

    `defs` is the code location (the caller loads it: the Dagster layer never imports the
    definitions module above it)."""
    todo = set(remaining(settings, generation))
    if not todo:
        say(f"generation {generation.name}: every ingested drop is applied to every store")
        return 0
    job = defs.resolve_job_def(build_job_name(generation))
    with ExitStack() as stack:
        if instance is None:
            instance = stack.enter_context(dg.DagsterInstance.get())
        ordered = instance.get_dynamic_partitions("ingest_batches")
        missing = sorted(todo - set(ordered))
        if missing:
            say(f"no partition for {len(missing)} ingested drops ({missing[0]} ...): "
                "run `candlefire register-drops`")  # fmt: skip
            return 1
        return _run_ranges(instance, job, ranges(ordered, todo, per_run), generation, say)


def _run_ranges(instance, job, runs: list[list[str]], generation: Generation, say) -> int:
    total, done, started = sum(len(r) for r in runs), 0, time.monotonic()
    say(f"generation {generation.name}: {total} drops to build in {len(runs)} runs")
    for number, keys in enumerate(runs, 1):
        tags = {RANGE_START: keys[0], RANGE_END: keys[-1]}
        result = job.execute_in_process(
            instance=instance, tags=tags, run_config=QUIET, raise_on_error=False
        )
        if not result.success:
            say(f"  run {number}/{len(runs)} ({keys[0]} .. {keys[-1]}) FAILED: run "
                f"{result.run_id}; fix it and run the command again (it resumes)")  # fmt: skip
            return 1
        done += len(keys)
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done)
        say(f"  {done}/{total} drops ({number}/{len(runs)} runs) in {elapsed:.0f} s, "
            f"ETA {eta:.0f} s; run {result.run_id}")  # fmt: skip
    return 0
