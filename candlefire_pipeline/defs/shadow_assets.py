"""shadow_parity: the rolling window of live shadow comparisons, on a cadence; its blocking
checks are the live-evidence gates, and a failing window while pgvector serves is sent to the
switch (the decision lives in operations/)."""

import dagster as dg

from candlefire_pipeline.defs.parity_assets import data_uri, log_watch
from candlefire_pipeline.defs.parity_checks import gate_check
from candlefire_pipeline.defs.resources import PgVectorResource, PipelineResource
from candlefire_pipeline.defs.serving_checks import serving_not_degraded
from candlefire_pipeline.operations.serving.watch import shadow_window_verdict, watch
from candlefire_pipeline.operations.shadow.window import (
    latest_shadow_evaluation,
    run_shadow_window,
)
from candlefire_pipeline.parity.gates import (
    INLINE_MARKDOWN_CHARS,
    GateResult,
    failed,
    gate_table_markdown,
)
from candlefire_pipeline.parity.shadow.gates import SHADOW_GATES
from candlefire_pipeline.parity.shadow.report import targets_table
from candlefire_pipeline.settings import Settings, code_location_settings

SHADOW_PARITY = dg.AssetKey("shadow_parity")


@dg.asset(
    key=SHADOW_PARITY,
    group_name="parity",
    kinds={"postgres"},
    automation_condition=dg.AutomationCondition.on_cron(code_location_settings().shadow.cron),
    description=(
        "Live parity: the app-facing reader replays a share of its requests "
        "(CANDLEFIRE_SHADOW_RATE) on the stores that do not serve; this is the rolling window "
        "of those comparisons per served store and target (samples, overlap, grounding, "
        "latency, errors, the worst divergences with their traced causes). Its blocking checks "
        "are the live-evidence gates; while pgvector serves, a failing window marks the switch "
        "DEGRADED. Refreshed on CANDLEFIRE_SHADOW_CRON."
    ),
)
def shadow_parity(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    settings = pipeline.settings()
    dsn = pgvector.resolved_dsn()
    run = run_shadow_window(settings, dsn)
    window = run.window
    if window.note:
        context.log.warning(f"shadow window: {window.note}")
    watched = watch(settings, shadow_window_verdict(settings, window), "dagster:shadow_parity",
                    dsn)  # fmt: skip
    log_watch(context, watched)
    folder = run.md_path.parent
    plots = [f"![{kind}]({data_uri(folder / name)})" for kind, name in run.plots.items()]
    return dg.MaterializeResult(
        metadata={
            "window_id": window.window_id,
            "window": dg.MetadataValue.md(targets_table(window)),
            "gates": dg.MetadataValue.md(gate_table_markdown(run.gates, INLINE_MARKDOWN_CHARS)),
            "failed_gates": ", ".join(failed(run.gates)) or "none",
            "samples": sum(t.samples for t in window.targets),
            "plots": dg.MetadataValue.md("\n".join(plots) or "No plots: no comparison."),
            "report": dg.MetadataValue.md(run.md_path.read_text()),
            "markdown_path": dg.MetadataValue.path(str(run.md_path)),
            "flushed_records": run.flushed.inserted,
            "pending_records": run.flushed.pending,
            "note": window.note or "",
            "serving_watch": watched.message,
        }
    )


def _latest_window(settings: Settings) -> tuple[str | None, list[GateResult]]:
    window, gates = latest_shadow_evaluation(settings)
    return (window.window_id if window else None), gates


shadow_checks = [
    *(
        gate_check(SHADOW_PARITY, name, text, _latest_window, "window")
        for name, text in SHADOW_GATES.items()
    ),  # fmt: skip
    serving_not_degraded(SHADOW_PARITY),
]
