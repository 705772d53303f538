"""parity_report and the serving_backend switch it gates (the decision lives in operations/)."""

import dagster as dg

from candlefire_pipeline.defs.automation import DECIDE_AFTER_PARITY, PARITY_AFTER_NEW_PARTITIONS
from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.defs.store_assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.store_policies import POSTGRES_POOL
from candlefire_pipeline.operations.parity import latest_evaluation, open_stores, run_report
from candlefire_pipeline.operations.serving_commands import auto_promote
from candlefire_pipeline.operations.serving_history import pending_entries
from candlefire_pipeline.parity.gates import failed, gate_table_markdown, gates_from_dicts


@dg.asset(
    group_name="parity",
    kinds={"python"},
    deps=[pgvector_chunks, chroma_chunks],
    automation_condition=PARITY_AFTER_NEW_PARTITIONS,
    description=(
        "The committed query set through the full retriever (entity, keyword and semantic "
        "search, RRF, rerank, boost) on Chroma, pgvector and the exact in-memory oracle: top-15 "
        "overlap, grounding agreement, latency, ANN recall, evidence and freshness. Its blocking "
        "checks are the gates of the flip; `gates` below shows them, `report` the whole report."
    ),
)
def parity_report(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    pgvector: PgVectorResource,
    chroma: ChromaResource,
) -> dg.MaterializeResult:
    settings = pipeline.settings()
    with open_stores(pgvector=pgvector, chroma=chroma) as stores:
        report = run_report(settings, pipeline.query_embedder(), stores)
    json_path, md_path = report.write(settings.reports_dir)
    headline = report.headline()
    context.log.info("parity: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(headline.items())))
    return dg.MaterializeResult(
        metadata={
            "report_id": report.report_id,
            # short enough for the asset page to show inline (the whole report is behind a link)
            "gates": dg.MetadataValue.md(gate_table_markdown(gates_from_dicts(report.gates))),
            "report": dg.MetadataValue.md(report.to_markdown()),
            "failed_gates": ", ".join(failed(gates_from_dicts(report.gates))) or "none",
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
        "promotes to pgvector only from the never-promoted state on a report passing every "
        "gate; an operator's pin (`candlefire rollback`) holds until `candlefire promote`. "
        "`serving_backend` below is the state now."
    ),
)
def serving_backend(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    settings = pipeline.settings()
    report, gates = latest_evaluation(settings)
    outcome = auto_promote(settings, report, gates, dsn=pgvector.resolved_dsn())
    state, decision = outcome.state, outcome.decision
    context.log.info(
        f"serving backend: {state.describe()} ({decision.outcome}: {decision.message})"
    )
    if state.backend == "pgvector" and failed(gates):
        context.log.warning(
            f"serving pgvector while the latest report fails {', '.join(failed(gates))}: "
            "`candlefire rollback --reason ...` pins Chroma"
        )
    return dg.MaterializeResult(
        metadata={
            "serving_backend": state.backend,
            "state": state.state,
            "describe": state.describe(),
            "pinned": state.pinned,
            "pin_reason": state.reason if state.pinned else "",
            "flipped_now": decision.outcome == "changed",
            "decision": decision.outcome,
            "verdict": decision.message,
            "failed_gates": ", ".join(failed(gates)) or ("no report" if report is None else "none"),
            "report_id": report.report_id if report else "",
            "gates": dg.MetadataValue.md(gate_table_markdown(gates)),
            "pending_history": len(pending_entries(settings.serving_pending_file)),
        }
    )
