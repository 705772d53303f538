"""`candlefire demo`: the whole DAG through `dg launch`, told as a short story on the terminal.

Every run's full Dagster log stays in the instance (the UI shows it) and in data/logs/demo.log;
the terminal gets one line per step, read from the materialization metadata of each run, the
progress lines of long steps while they run, and a summary.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from candlefire_pipeline.defs.progress import PROGRESS_PREFIX
from candlefire_pipeline.demo_story import (
    STORE_OF_ASSET,
    serving_summary,
    step_lines,
    summary_lines,
)
from candlefire_pipeline.settings import Settings

POLL_S = 0.5
#: Progress lines are shown for steps running at least this long (short ones only get a result).
LONG_STEP_S = 5.0
_RECORD_TYPES = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
    dg.DagsterEventType.STEP_FAILURE,
}


@dataclass
class RunStory:
    """What one launched run did, read from the instance's event log."""

    run_id: str | None = None
    succeeded: bool = False
    materialized: dict[str, dict] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _dg_launch(job: str, partition: str | None) -> list[str]:
    cmd = [str(Path(sys.executable).with_name("dg")), "launch", "--job", job]
    if partition is not None:
        cmd += ["--partition", partition]
    return [*cmd, "-m", "candlefire_pipeline.definitions"]


def _find_run(instance: dg.DagsterInstance, job: str, since: datetime) -> str | None:
    runs = instance.get_runs(dg.RunsFilter(job_name=job, created_after=since), limit=1)
    return runs[0].run_id if runs else None


def progress_messages(records, step_started: dict[str, float]) -> list[str]:
    """Progress lines of steps that have run for LONG_STEP_S; records STEP_START times."""
    shown = []
    for record in records:
        entry = record.event_log_entry
        if entry.dagster_event_type == dg.DagsterEventType.STEP_START:
            step_started[entry.step_key] = entry.timestamp
        elif not entry.is_dagster_event and entry.user_message.startswith(PROGRESS_PREFIX):
            started = step_started.get(entry.step_key, entry.timestamp)
            if entry.timestamp - started >= LONG_STEP_S:
                shown.append(entry.user_message.removeprefix(PROGRESS_PREFIX))
    return shown


def _watch(proc, instance, job: str, since: datetime, say: Callable[[str], None]) -> str | None:
    """Wait for the launched process; print progress lines of its run meanwhile."""
    run_id, cursor, step_started = None, None, {}
    while True:
        finished = proc.poll() is not None
        run_id = run_id or _find_run(instance, job, since)
        if run_id is not None:
            page = instance.get_records_for_run(run_id, cursor=cursor)
            cursor = page.cursor or cursor
            for message in progress_messages(page.records, step_started):
                say(f"    {'progress':<11} {message}")
        if finished:
            return run_id
        time.sleep(POLL_S)


def _read_story(instance: dg.DagsterInstance, run_id: str) -> RunStory:
    story = RunStory(run_id=run_id)
    run = instance.get_run_by_id(run_id)
    story.succeeded = run is not None and run.status == dg.DagsterRunStatus.SUCCESS
    for record in instance.get_records_for_run(run_id, of_type=_RECORD_TYPES).records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            metadata = {k: v.value for k, v in entry.asset_materialization.metadata.items()}
            story.materialized[entry.asset_materialization.asset_key.to_user_string()] = metadata
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            story.checks[event.event_specific_data.check_name] = event.event_specific_data.passed
        else:
            message = event.event_specific_data.error.message.strip().splitlines()[0]
            story.failures.append(f"{event.step_key}: {message}")
    return story


def launch(
    instance: dg.DagsterInstance, job: str, partition: str | None, log_path: Path, say
) -> RunStory:
    """`dg launch` one run (its output appended to log_path); what it did, from the instance."""
    since = datetime.now(UTC)
    env = {**os.environ, "VIRTUAL_ENV": sys.prefix}
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            _dg_launch(job, partition), stdout=log, stderr=subprocess.STDOUT, env=env
        )
        run_id = _watch(proc, instance, job, since, say)
    if run_id is None:
        return RunStory(failures=[f"dg launch exited {proc.returncode} before starting a run"])
    return _read_story(instance, run_id)


def _quiet_logging(log_path: Path) -> None:
    """Library logs and warnings go to the log file; the terminal gets the story only."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.captureWarnings(True)


def _store_chunks(instance: dg.DagsterInstance, stores) -> dict[str, int | None]:
    counts: dict[str, int | None] = {}
    for asset, store in STORE_OF_ASSET.items():
        if store not in stores:
            continue
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
        metadata = event.asset_materialization.metadata if event else {}
        counts[store] = metadata["store_chunks"].value if "store_chunks" in metadata else None
    return counts


def _tell(story: RunStory, seconds: float, log_path: Path, say) -> bool:
    for line in step_lines(story.materialized, story.checks):
        say(line)
    if story.succeeded:
        say(f"    {'done':<11} in {seconds:.0f} s")
        return True
    for failure in story.failures or ["the run did not succeed"]:
        say(f"    FAILED     {failure}")
    say(f"    full log: {log_path} (and the run's page in `make ui`)")
    return False


def run_demo(settings: Settings, register_drops, say: Callable[[str], None] = print) -> int:
    """Write the demo drops, ingest each through `dg launch`, run parity; 0 when all succeeded."""
    from candlefire_pipeline.corpus.demo import write_demo_drops

    log_path = settings.logs_dir / "demo.log"
    _quiet_logging(log_path)
    written = write_demo_drops(settings.drops_dir)
    say(f"candlefire demo: {len(written)} demo drops in {settings.drops_dir}")
    say(f"  full Dagster logs: {log_path} and the UI (make ui)")
    keys = register_drops(settings)
    n = len(keys) + 1
    steps = [("ingest_job", key, f"[{i}/{n}] ingest {key}") for i, key in enumerate(keys, 1)]
    steps.append(("parity_job", None, f"[{n}/{n}] parity report and serving decision"))
    ok = True
    with dg.DagsterInstance.get() as instance:
        for job, partition, title in steps:
            say(title)
            started = time.monotonic()
            story = launch(instance, job, partition, log_path, say)
            ok = _tell(story, time.monotonic() - started, log_path, say)
            if not ok and job == "ingest_job":
                return 1  # no parity over a half-applied demo
        store_chunks = _store_chunks(instance, settings.stores)
    for line in summary_lines(store_chunks, serving_summary(settings)):
        say(line)
    return 0 if ok else 1
