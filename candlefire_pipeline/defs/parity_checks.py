"""Blocking checks, one per gate: on parity_report (a failure stops serving_backend in the run)
and, for the live-evidence gates, on shadow_parity; plus the non-blocking serving_not_degraded
check on both (each sends its windows to the switch)."""

from collections.abc import Callable

import dagster as dg

from candlefire_pipeline.defs.parity_assets import PARITY_REPORT
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.defs.serving_checks import serving_not_degraded
from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.parity.gates import GATES, GateResult
from candlefire_pipeline.settings import Settings

#: settings -> (the evidence's id, or None when there is none; its gates evaluated now)
Evaluation = Callable[[Settings], tuple[str | None, list[GateResult]]]


def gate_check(
    asset: dg.AssetKey, gate_name: str, description: str, evaluate: Evaluation, evidence: str
) -> dg.AssetChecksDefinition:
    """A blocking check that passes exactly when the gate does (`evidence`: what it judges)."""

    @dg.asset_check(asset=asset, name=gate_name, blocking=True, description=description)
    def _check(pipeline: PipelineResource) -> dg.AssetCheckResult:
        evidence_id, gates = evaluate(pipeline.settings())
        gate = next((g for g in gates if g.name == gate_name), None)
        if gate is None:
            return dg.AssetCheckResult(passed=False, metadata={"detail": f"no {evidence}"})
        return dg.AssetCheckResult(
            passed=gate.passed,
            metadata={
                "value": float(gate.value),
                "threshold": float(gate.threshold),
                "detail": gate.detail,
                f"{evidence}_id": evidence_id or "",
            },
        )

    return _check


def _latest_report(settings: Settings) -> tuple[str | None, list[GateResult]]:
    report, gates = latest_evaluation(settings)
    return (report.report_id if report else None), gates


parity_checks = [
    *(gate_check(PARITY_REPORT, n, text, _latest_report, "report") for n, text in GATES.items()),
    serving_not_degraded(PARITY_REPORT),
]
