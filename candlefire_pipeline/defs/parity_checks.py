"""Blocking checks on parity_report, one per gate (a failure stops serving_backend in the run),
and the non-blocking serving_not_degraded check (the report is one of the watched windows)."""

import dagster as dg

from candlefire_pipeline.defs.parity_assets import PARITY_REPORT
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.defs.serving_checks import serving_not_degraded
from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.parity.gates import GATES


def _gate_check(gate_name: str, description: str):
    @dg.asset_check(asset=PARITY_REPORT, name=gate_name, blocking=True, description=description)
    def _check(pipeline: PipelineResource) -> dg.AssetCheckResult:
        report, gates = latest_evaluation(pipeline.settings())
        if report is None:
            return dg.AssetCheckResult(passed=False, metadata={"detail": "no report"})
        gate = next(g for g in gates if g.name == gate_name)
        return dg.AssetCheckResult(
            passed=gate.passed,
            metadata={
                "value": float(gate.value),
                "threshold": float(gate.threshold),
                "detail": gate.detail,
                "report_id": report.report_id,
            },
        )

    return _check


parity_checks = [
    *(_gate_check(name, text) for name, text in GATES.items()),
    serving_not_degraded(PARITY_REPORT),
]
