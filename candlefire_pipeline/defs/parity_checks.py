"""Blocking checks on parity_report; a failure stops serving_backend in the same run."""

import dagster as dg

from candlefire_pipeline.defs.parity_assets import parity_report
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.operations.parity import all_gates
from candlefire_pipeline.parity.report import load_latest

GATES = {
    "grounding_agreement": "Grounding booleans agree on every query (default 100%).",
    "mean_overlap": "Mean top-15 PMID overlap with Chroma is at least the threshold (0.9).",
    "p95_ratio": "pgvector p95 latency is at most 1.5x Chroma's.",
    "chunk_counts_equal": "Both stores hold the same number of chunks.",
    "report_is_fresh": "The report is newer than the latest applied ingest batch.",
}


def _gate_check(gate_name: str, description: str):
    @dg.asset_check(asset=parity_report, name=gate_name, blocking=True, description=description)
    def _check(pipeline: PipelineResource) -> dg.AssetCheckResult:
        settings = pipeline.settings()
        report = load_latest(settings.reports_dir)
        if report is None:
            return dg.AssetCheckResult(passed=False, metadata={"detail": "no report"})
        gate = next((g for g in all_gates(settings, report) if g.name == gate_name), None)
        if gate is None:
            raise dg.Failure(f"parity gate {gate_name!r} is not evaluated by the report")
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


parity_checks = [_gate_check(name, text) for name, text in GATES.items()]
