"""`<name>/parity_report`: a generation compared with what serves; one blocking check per gate.

The same comparison `candlefire generation compare NAME` runs (operations/generations/compare.py);
its gates are what a promotion of the generation must pass (docs/GENERATIONS.md, section 4).
While the generation serves, it is compared with its rollback target instead, and the verdict
goes to the switch like the default's parity report (a failure marks serving DEGRADED). It
refreshes after new partitions of its stores, as the default's report does."""

import dagster as dg

from candlefire_pipeline.defs.automation import GENERATION_REPORT_TAG, parity_after_new_partitions
from candlefire_pipeline.defs.generations.assets import group_name, live_generation
from candlefire_pipeline.defs.parity_assets import log_watch
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.view import reports_dir
from candlefire_pipeline.operations.generations.compare import (
    PROMOTION_BACKEND,
    latest_comparison,
    run_comparison,
    watches_serving,
)
from candlefire_pipeline.operations.serving.commands import history_dsn
from candlefire_pipeline.operations.serving.watch import (
    REPORT_SOURCE,
    WatchResult,
    judge,
    watch,
)
from candlefire_pipeline.parity.gates import failed, gate_table_markdown, gates_from_dicts
from candlefire_pipeline.parity.generation_gates import GENERATION_GATES
from candlefire_pipeline.parity.generation_report import GenerationReport
from candlefire_pipeline.settings import Settings

CANDIDATE_ONLY = "a candidate's comparison: it judges a promotion, not what serves"


def _key(generation: Generation) -> dg.AssetKey:
    return dg.AssetKey([generation.name, "parity_report"])


def _store_key(generation: Generation, store: str) -> dg.AssetKey:
    return dg.AssetKey([generation.name, f"{store}_chunks"])


def _watch(settings: Settings, report: GenerationReport, gates) -> WatchResult | None:
    """The verdict sent to the switch when the report watched what serves (None: a candidate)."""
    if not watches_serving(settings, report):
        return None
    window = judge(REPORT_SOURCE, report.report_id, gates)
    name = report.candidate["generation"]
    return watch(settings, window, f"dagster:{name}/parity_report", history_dsn(settings), name)


def generation_parity_report(generation: Generation, stores) -> dg.AssetsDefinition:
    gated = [s for s in stores if s == PROMOTION_BACKEND] or list(stores)

    @dg.asset(
        key=_key(generation),
        group_name=group_name(generation),
        kinds={"python"},
        tags={GENERATION_REPORT_TAG: "true"},
        deps=[_store_key(generation, store) for store in stores],
        automation_condition=parity_after_new_partitions(
            [_store_key(generation, s) for s in gated]
        ),
        description=(
            f"Generation {generation.name} against what serves now: kind quality (nDCG@10 on "
            "a judged set, bootstrap 95% interval) when the model or chunker differs, overlap "
            "when only the layout does; grounding, latency, ANN recall against its own oracle "
            "and every store against its ledger. Its checks are the gates a promotion of "
            f"{generation.name} must pass. While it serves: compared with its rollback target, "
            "the verdict sent to the switch (a failure marks serving DEGRADED)."
        ),
    )
    def _report(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        settings = pipeline.settings()
        current = live_generation(settings, generation.name)
        report = run_comparison(settings, current.name)
        json_path, md_path = report.write(reports_dir(settings, current))
        gates = gates_from_dicts(report.gates)
        context.log.info(f"{report.kind} comparison: {report.why}")
        watched = _watch(settings, report, gates)
        if watched is not None:
            log_watch(context, watched)
        return dg.MaterializeResult(
            metadata={
                "report_id": report.report_id,
                "kind": report.kind,
                "why": report.why,
                "reference": "/".join(report.target("reference")),
                "candidate": "/".join(report.target("candidate")),
                "gates": dg.MetadataValue.md(gate_table_markdown(gates)),
                "failed_gates": ", ".join(failed(gates)) or "none",
                "report": dg.MetadataValue.md(report.markdown()),
                "json_path": dg.MetadataValue.path(str(json_path)),
                "markdown_path": dg.MetadataValue.path(str(md_path)),
                "serving_watch": watched.message if watched else CANDIDATE_ONLY,
            }
        )

    return _report


def _gate_check(generation: Generation, gate_name: str, description: str):
    @dg.asset_check(asset=_key(generation), name=gate_name, blocking=True, description=description)
    def _check(pipeline: PipelineResource) -> dg.AssetCheckResult:
        settings = pipeline.settings()
        report, gates = latest_comparison(settings, live_generation(settings, generation.name))
        if report is None:
            return dg.AssetCheckResult(passed=False, metadata={"detail": "no comparison"})
        gate = next(g for g in gates if g.name == gate_name)
        return dg.AssetCheckResult(
            passed=gate.passed,
            metadata={"value": float(gate.value), "threshold": float(gate.threshold),
                      "detail": gate.detail, "report_id": report.report_id},
        )  # fmt: skip

    return _check


def generation_gate_checks(generation: Generation) -> list[dg.AssetChecksDefinition]:
    return [_gate_check(generation, name, text) for name, text in GENERATION_GATES.items()]
