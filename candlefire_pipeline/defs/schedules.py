"""Schedules: the daily PubMed fetch, and the nightly parity refresh."""

from datetime import timedelta

import dagster as dg

from candlefire_pipeline.defs.fetch_job import pubmed_fetch_job
from candlefire_pipeline.defs.jobs import parity_job
from candlefire_pipeline.settings import Settings, code_location_settings

_SETTINGS = code_location_settings()

parity_refresh_schedule = dg.ScheduleDefinition(
    name="parity_refresh_schedule",
    job=parity_job,
    cron_schedule=_SETTINGS.parity_cron,
    execution_timezone="UTC",
    description="Nightly by default (CANDLEFIRE_PARITY_CRON).",
)


@dg.schedule(
    job=pubmed_fetch_job,
    cron_schedule=_SETTINGS.fetch_cron,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Daily (CANDLEFIRE_FETCH_CRON): PubMed records added in the last "
        "CANDLEFIRE_PUBMED_LOOKBACK_DAYS days for CANDLEFIRE_PUBMED_QUERY, as one new drop."
    ),
)
def pubmed_fetch_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    settings = Settings.from_env()
    day = context.scheduled_execution_time.date()
    window = {
        "query": settings.pubmed_query,
        "since": (day - timedelta(days=settings.pubmed_lookback_days)).isoformat(),
        "until": day.isoformat(),
    }
    return dg.RunRequest(
        run_key=f"pubmed-fetch-{day.isoformat()}",
        run_config={"ops": {"fetch_pubmed_drop": {"config": window}}},
        tags={"candlefire/fetch_day": day.isoformat()},
    )
