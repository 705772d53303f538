"""store_maintenance: the weekly index health of every store, as asset metadata (core logic in
operations/maintenance.py).

An asset, not an op job: what it produces is the state of the stores, and a Dagster user looks
for that on an asset page, where each week's figures (bloat, dead tuples, what was rebuilt) stay
in the materialization history and plot over time; an op's output would only be in run logs.
"""

import dagster as dg

from candlefire_pipeline.defs.resources import store_resources
from candlefire_pipeline.defs.stores.policies import POSTGRES_POOL
from candlefire_pipeline.operations.maintenance import (
    MaintenanceReport,
    actions_markdown,
    format_maintenance,
    maintain,
)
from candlefire_pipeline.settings import code_location_settings
from candlefire_pipeline.stores import STORE_NAMES


class MaintenanceConfig(dg.Config):
    """apply=False reports what would be done and changes nothing (`candlefire maintain`)."""

    apply: bool = True


@dg.asset(
    group_name="maintenance",
    kinds={"postgres"},
    # waits while an ingest run writes Postgres: a rebuild never competes with a batch's COPY
    pool=POSTGRES_POOL,
    required_resource_keys={"pipeline", *STORE_NAMES},
    description=(
        "Index health of every fed store, weekly (store_maintenance_schedule): pgvector dead "
        "tuples, (auto)vacuums, HNSW / GIN bytes against a fresh build's (bloat), and VACUUM / "
        "REINDEX INDEX CONCURRENTLY when a threshold is crossed (serving is never blocked); "
        "Chroma and Qdrant as their APIs show them. `apply: false` is a dry run."
    ),
)
def store_maintenance(
    context: dg.AssetExecutionContext, config: MaintenanceConfig
) -> dg.MaterializeResult:
    settings = context.resources.pipeline.settings()
    resources = store_resources(context)
    report = maintain(settings, config.apply, lambda name: resources[name].open())
    context.log.info(format_maintenance(report))
    if report.failed:
        raise dg.Failure(description=format_maintenance(report), metadata=_metadata(report))
    return dg.MaterializeResult(metadata=_metadata(report))


def _metadata(report: MaintenanceReport) -> dict:
    figures = {
        f"{health.store}_{name}": value
        for health in report.stores
        for name, value in health.figures.items()
        if isinstance(value, int | float | str)
    }
    return {
        "applied": report.applied,
        "actions": dg.MetadataValue.md(actions_markdown(report)),
        "actions_done": sum(a.done for a in report.actions),
        "actions_pending": sum(not a.done for a in report.actions),
        "report": dg.MetadataValue.md(f"```\n{format_maintenance(report)}\n```"),
        **figures,
    }


store_maintenance_job = dg.define_asset_job(
    "store_maintenance_job",
    selection=[store_maintenance],
    description="store_maintenance on its own (the weekly schedule's job).",
)

store_maintenance_schedule = dg.ScheduleDefinition(
    name="store_maintenance_schedule",
    job=store_maintenance_job,
    cron_schedule=code_location_settings().maintenance_cron,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Weekly by default (CANDLEFIRE_MAINTENANCE_CRON, Sundays 04:00 UTC): "
    "store_maintenance with apply (rebuilds what crossed a threshold).",
)
