"""pubmed_drops_sensor: every complete new (or replaced) drop file becomes a partition and a run."""

import dagster as dg

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


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=sensor_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches the drops folder; a file must keep its size and mtime for one tick.",
)
def pubmed_drops_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    drops_dir = Settings.from_env().drops_dir
    cursor = DropCursor.parse(context.cursor)
    ready, cursor = ready_drops(scan_drops(drops_dir), cursor)
    ready = [d for d in ready if _valid(d.name, context)]
    known = set(context.instance.get_dynamic_partitions(ingest_batches.name))
    new_keys = sorted({d.name for d in ready} - known)
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
        skip_reason=None if ready else f"no new complete drops in {drops_dir}",
    )
