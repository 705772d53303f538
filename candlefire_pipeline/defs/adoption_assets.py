"""app_collection_adoption: the collection the app serves against the ledger, id by id, and
(config `import_rows: true`) its import (core: operations/adoption/). Materialized by hand or from
the CLI (`dg launch --assets app_collection_adoption`); the flip's gate reads its latest report.
"""

import dagster as dg

from candlefire_pipeline.defs.stores.policies import POSTGRES_POOL
from candlefire_pipeline.operations.adoption.classify import CLASSES
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.report import (
    AdoptionReport,
    build_report,
    class_table,
    report_markdown,
    reports_dir,
)
from candlefire_pipeline.operations.adoption.source import AdoptionError
from candlefire_pipeline.stores import STORE_NAMES


class AdoptionConfig(dg.Config):
    """import_rows: also seed the ledger and every written store from the app's rows."""

    import_rows: bool = False


@dg.asset(
    group_name="parity",
    kinds={"chroma"},
    pool=POSTGRES_POOL,
    required_resource_keys={"pipeline", *STORE_NAMES},
    description=(
        "The collection the app serves (CANDLEFIRE_APP_CHROMA_PATH / _HOST, never written: its "
        "folder is read through a snapshot) against the ledger: every chunk id identical, only "
        "in the app (stale: why), only in the ledger (new), document / metadata / vector "
        "differs, and whose model its vectors are. `import_rows: true` imports it as the "
        "ledger's first batches into every written store. The gate app_collection_agreement "
        "holds the flip until a current report and an import (or full agreement) exist."
    ),
)
def app_collection_adoption(
    context: dg.AssetExecutionContext, config: AdoptionConfig
) -> dg.MaterializeResult:
    pipeline = context.resources.pipeline
    settings = pipeline.settings()
    if not settings.app_collection.configured:
        context.log.info("no app collection is configured: nothing to adopt")
        return dg.MaterializeResult(metadata={"configured": False})
    try:
        if config.import_rows:
            result = run_import(settings, pipeline.embedder(), context.log.info)
            report, seconds = result.report, result.seconds
        else:
            report, _ = build_report(settings, pipeline.embedder(), context.log.info)
            seconds = report.seconds
    except AdoptionError as exc:
        raise dg.Failure(description=str(exc)) from None
    return dg.MaterializeResult(metadata=_metadata(report, seconds, settings))


def _metadata(report: AdoptionReport, seconds: dict, settings) -> dict:
    folder = reports_dir(settings) / report.report_id
    return {
        "configured": True,
        "report_id": report.report_id,
        "where": report.where,
        "fingerprint": report.fingerprint[:16],
        "rows": report.rows,
        "dim": report.dim or 0,
        **{f"chunks_{kind}": report.counts[kind] for kind in CLASSES},
        "model_check": report.model["summary"],
        "imported": report.imported["summary"],
        "classes": dg.MetadataValue.md(class_table(report)),
        "report": dg.MetadataValue.md(report_markdown(report)),
        "report_path": dg.MetadataValue.path(str(folder / "report.md")),
        **{f"seconds_{name}": round(value, 3) for name, value in seconds.items()},
    }
