"""pubmed_drops_sensor: every complete new (or replaced) drop file becomes a partition and a run.

Drops whose current version is in the shared drop record (taken in by any run, or registered by
`candlefire register-drops`) are not launched again; they only get their partition if missing.
"""

import dagster as dg

from candlefire_pipeline.corpus.drop_order import applied_drops, order_warning, sorting_before
from candlefire_pipeline.corpus.drop_record import DropRecordError, read_record
from candlefire_pipeline.corpus.drop_scan import DropCursor, ready_drops, scan_drops
from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.defs.jobs import ingest_job
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.settings import Settings, sensor_interval_seconds


def _valid(name: str, context: dg.SensorEvaluationContext) -> bool:
    try:
        validate_batch_key(name)
    except ValueError as exc:
        context.log.warning(f"ignoring drop {name!r}: {exc}")
        return False
    return True


def _taken_in(settings: Settings, context: dg.SensorEvaluationContext) -> dict[str, str]:
    try:
        return read_record(settings.drop_record_file)
    except DropRecordError as exc:
        # re-ingesting is idempotent (replace by paper); never ingesting is not
        context.log.warning(f"{exc}; treating every drop as new")
        return {}


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=sensor_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches the drops folder; a file must keep its size and mtime for one tick. Drops "
        "already taken in (the shared drop record: runs, `candlefire register-drops`) are "
        "not launched again unless the file changes."
    ),
)
def pubmed_drops_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    settings = Settings.from_env()
    files = scan_drops(settings.drops_dir)
    taken_in = _taken_in(settings, context)
    ready, cursor = ready_drops(files, DropCursor.parse(context.cursor), taken_in)
    ready = [d for d in ready if _valid(d.name, context)]  # warned once: the cursor saw them
    known = set(context.instance.get_dynamic_partitions(ingest_batches.name))
    recorded = {d.name for d in files if taken_in.get(d.name) == d.run_key}
    new_keys = sorted(({d.name for d in ready} | recorded) - known)
    applied = applied_drops(settings.batches_dir, settings.stores)
    for name, later in sorting_before([d.name for d in ready], applied).items():
        context.log.warning(order_warning(name, later))
    if cursor.pending:
        context.log.info(
            f"waiting for {len(cursor.pending)} drop(s) to settle: {sorted(cursor.pending)}"
        )
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=d.run_key, partition_key=d.name) for d in ready],
        dynamic_partitions_requests=[ingest_batches.build_add_request(new_keys)]
        if new_keys
        else [],
        cursor=cursor.dump(),
        skip_reason=None
        if ready
        else f"no new complete drops in {settings.drops_dir} ({len(recorded)} already taken in)",
    )
