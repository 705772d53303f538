"""parity_refresh_schedule: after the day's drops, refresh the report and the serving decision."""

import dagster as dg

from candlefire_pipeline.defs.jobs import parity_job
from candlefire_pipeline.settings import Settings

parity_refresh_schedule = dg.ScheduleDefinition(
    name="parity_refresh_schedule",
    job=parity_job,
    cron_schedule=Settings.from_env().ingest_cron,
    execution_timezone="UTC",
    description="Nightly by default (CANDLEFIRE_INGEST_CRON).",
)
