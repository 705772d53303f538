"""parity_report and the serving_backend switch it gates."""

import dagster as dg

from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.defs.store_assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.operations.parity import all_gates, open_stores, run_report
from candlefire_pipeline.operations.serving import read_state, record_state
from candlefire_pipeline.parity.report import load_latest


@dg.asset(group_name="parity", kinds={"python"}, deps=[pgvector_chunks, chroma_chunks])
def parity_report(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    pgvector: PgVectorResource,
    chroma: ChromaResource,
) -> dg.MaterializeResult:
    """The same query set through the full retriever on Chroma, pgvector and the exact oracle."""
    settings = pipeline.settings()
    with open_stores(pgvector, chroma) as stores:
        report = run_report(settings, pipeline.query_embedder(), stores)
    json_path, md_path = report.write(settings.reports_dir)
    headline = report.headline()
    context.log.info("parity: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(headline.items())))
    return dg.MaterializeResult(
        metadata={
            "report_id": report.report_id,
            "report": dg.MetadataValue.md(report.to_markdown()),
            "json_path": dg.MetadataValue.path(str(json_path)),
            "markdown_path": dg.MetadataValue.path(str(md_path)),
            **{k: dg.MetadataValue.float(float(v)) for k, v in headline.items()},
        }
    )


@dg.asset(group_name="parity", kinds={"postgres"}, deps=[parity_report])
def serving_backend(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    """Flips serving to pgvector only when every gate passes on a fresh report."""
    settings = pipeline.settings()
    current = read_state(settings.serving_file)
    report = load_latest(settings.reports_dir)
    if report is None:
        gates, verdict = [], "no parity report yet"
    else:
        gates = all_gates(settings, report)
        failed = [g.name for g in gates if not g.passed]
        verdict = f"failed gates: {', '.join(failed)}" if failed else "all gates passed"
    flip = report is not None and all(g.passed for g in gates) and current.backend != "pgvector"
    if flip:
        current = record_state(
            settings.serving_file, pgvector.resolved_dsn(), "pgvector", report.report_id,
            f"parity report {report.report_id}: {verdict}",
        )  # fmt: skip
    context.log.info(f"serving backend: {current.backend} ({verdict})")
    table = "\n".join(
        f"| {g.name} | {'pass' if g.passed else 'FAIL'} | {g.value:.3f} | {g.threshold:.3f} |"
        for g in gates
    )
    return dg.MaterializeResult(
        metadata={
            "serving_backend": current.backend,
            "flipped_now": flip,
            "verdict": verdict,
            "report_id": report.report_id if report else "",
            "gates": dg.MetadataValue.md(
                f"| gate | result | value | threshold |\n|---|---|---|---|\n{table}"
            ),
        }
    )
