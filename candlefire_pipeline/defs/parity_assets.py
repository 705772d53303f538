"""parity_report and the serving_backend switch it gates."""

import dagster as dg

from candlefire_pipeline.defs.automation import DECIDE_AFTER_PARITY, PARITY_AFTER_NEW_PARTITIONS
from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.defs.store_assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.store_policies import POSTGRES_POOL
from candlefire_pipeline.operations.parity import all_gates, open_stores, run_report
from candlefire_pipeline.operations.serving import read_state, record_state
from candlefire_pipeline.parity.report import load_latest


def _gates_markdown(gates) -> str:
    rows = "\n".join(
        f"| {g.name} | {'pass' if g.passed else 'FAIL'} | {g.value:.3f} | {g.threshold:.3f} |"
        for g in gates
    )
    return f"| gate | result | value | threshold |\n|---|---|---|---|\n{rows}"


@dg.asset(
    group_name="parity",
    kinds={"python"},
    deps=[pgvector_chunks, chroma_chunks],
    automation_condition=PARITY_AFTER_NEW_PARTITIONS,
    description=(
        "The committed query set through the full retriever (entity, keyword and semantic "
        "search, RRF, rerank, boost) on Chroma, pgvector and the exact in-memory oracle: top-15 "
        "overlap, grounding agreement, latency, ANN recall. Its blocking checks are the gates "
        "of the flip; `gates` below shows them, `report` the whole report."
    ),
)
def parity_report(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    pgvector: PgVectorResource,
    chroma: ChromaResource,
) -> dg.MaterializeResult:
    settings = pipeline.settings()
    with open_stores(pgvector, chroma) as stores:
        report = run_report(settings, pipeline.embedder(), stores)
    json_path, md_path = report.write(settings.reports_dir)
    headline = report.headline()
    context.log.info("parity: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(headline.items())))
    return dg.MaterializeResult(
        metadata={
            "report_id": report.report_id,
            # short enough for the asset page to show inline (the whole report is behind a link)
            "gates": dg.MetadataValue.md(_gates_markdown(all_gates(settings, report))),
            "report": dg.MetadataValue.md(report.to_markdown()),
            "json_path": dg.MetadataValue.path(str(json_path)),
            "markdown_path": dg.MetadataValue.path(str(md_path)),
            **{k: dg.MetadataValue.float(float(v)) for k, v in headline.items()},
        }
    )


@dg.asset(
    group_name="parity",
    kinds={"postgres"},
    deps=[parity_report],
    pool=POSTGRES_POOL,
    automation_condition=DECIDE_AFTER_PARITY,
    description=(
        "The serving switch the app reads (data/serving_backend.json, history in Postgres): "
        "flips to pgvector only when every gate passes on a fresh report; `candlefire "
        "rollback` serves from Chroma again at once. `serving_backend` below is the state now."
    ),
)
def serving_backend(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
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
    return dg.MaterializeResult(
        metadata={
            "serving_backend": current.backend,
            "flipped_now": flip,
            "verdict": verdict,
            "report_id": report.report_id if report else "",
            "gates": dg.MetadataValue.md(_gates_markdown(gates)),
        }
    )
