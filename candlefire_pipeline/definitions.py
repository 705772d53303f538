"""The code location: assembles assets, checks, jobs, sensors, schedules and resources."""

import dagster as dg

from candlefire_pipeline.defs.adoption_assets import app_collection_adoption
from candlefire_pipeline.defs.automation import parity_automation_sensor
from candlefire_pipeline.defs.backup_assets import (
    store_backup,
    store_backup_job,
    store_backup_schedule,
)
from candlefire_pipeline.defs.executor import pipeline_executor
from candlefire_pipeline.defs.fetch_job import pubmed_fetch_job
from candlefire_pipeline.defs.generations.definitions import (
    all_generation_assets,
    all_generation_checks,
    all_generation_jobs,
)
from candlefire_pipeline.defs.ingest_assets import chunks, embeddings, papers
from candlefire_pipeline.defs.jobs import ingest_job, parity_job
from candlefire_pipeline.defs.maintenance_assets import (
    store_maintenance,
    store_maintenance_job,
    store_maintenance_schedule,
)
from candlefire_pipeline.defs.parity_assets import build_parity_report, serving_backend
from candlefire_pipeline.defs.parity_checks import parity_checks
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.defs.schedules import parity_refresh_schedule, pubmed_fetch_schedule
from candlefire_pipeline.defs.sensors import pubmed_drops_sensor
from candlefire_pipeline.defs.shadow_assets import shadow_checks, shadow_parity
from candlefire_pipeline.defs.stores.assets import store_assets
from candlefire_pipeline.defs.stores.checks import build_store_checks
from candlefire_pipeline.settings import Settings, code_location_settings


def build_definitions(settings: Settings) -> dg.Definitions:
    """The code location for these settings (its fed stores, its live generations)."""
    return dg.Definitions(
        assets=[
            papers,
            chunks,
            embeddings,
            *store_assets(settings.stores),
            build_parity_report(settings.stores),
            serving_backend,
            app_collection_adoption,
            shadow_parity,
            store_maintenance,
            store_backup,
            *all_generation_assets(settings),
        ],
        asset_checks=[
            *build_store_checks(settings.stores),
            *parity_checks,
            *shadow_checks,
            *all_generation_checks(settings),
        ],
        jobs=[
            ingest_job,
            parity_job,
            pubmed_fetch_job,
            store_maintenance_job,
            store_backup_job,
            *all_generation_jobs(settings),
        ],  # fmt: skip
        sensors=[pubmed_drops_sensor, parity_automation_sensor],
        schedules=[
            parity_refresh_schedule,
            pubmed_fetch_schedule,
            store_maintenance_schedule,
            store_backup_schedule,
        ],
        resources=build_resources(settings),
        executor=pipeline_executor(),
    )


defs = build_definitions(code_location_settings())
