"""The gate on the collection the app serves: with one configured, the flip needs a current
adoption report and either a complete import of that collection or a parity report in which the
candidate answers every query as the app's collection does (operations/adoption/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from candlefire_pipeline.parity.gate_result import GateResult, unknown

if TYPE_CHECKING:
    from candlefire_pipeline.parity.report.model import ParityReport

NAME = "app_collection_agreement"
DESCRIPTION = (
    "With an app collection configured (CANDLEFIRE_APP_CHROMA_PATH / _HOST): a current adoption "
    "report of it (its fingerprint now), and either its import complete in every written store "
    "or the candidate answering every query as the app's collection does (ties within 1e-5 "
    "only); not configured = not required."
)


def app_collection_gate(report: ParityReport, adoption: dict | None) -> GateResult:
    """`adoption`: operations.adoption.reference.adoption_now() ({} or None: not configured)."""
    if not adoption:
        return GateResult(NAME, True, 0.0, 0.0, "no app collection is configured: nothing to "
                          "adopt", "not configured", "not required")  # fmt: skip
    if "error" in adoption:
        return unknown(NAME, 1.0, 0.0, adoption["error"], "= 0")
    if adoption.get("report_fingerprint") != adoption["fingerprint"]:
        why = (
            "no adoption report"
            if adoption.get("report_id") is None
            else f"adoption report {adoption['report_id']} read another version of it"
        )
        return GateResult(NAME, False, 1.0, 0.0, f"{why}: the app's collection is "
                          f"{adoption['fingerprint'][:16]} now; run `candlefire adopt report`",
                          "no current report", "= 0")  # fmt: skip
    imported = adoption.get("imported") or {}
    found = report.app_collection or {}
    if imported.get("complete"):
        differing = int(found.get("differing", 0))
        return GateResult(NAME, True, 0.0, 0.0, f"{imported['summary']}; {differing} of "
                          f"{found.get('queries', 0)} queries answer otherwise than the app's "
                          "collection (drops since the import)", "imported", "= 0")  # fmt: skip
    if not found or "error" in found:
        why = found.get("error", "the parity report did not compare the app's collection")
        return unknown(NAME, 1.0, 0.0, f"{why}; re-run parity_report", "= 0")
    if found.get("fingerprint") != adoption["fingerprint"]:
        why = "the parity report compared another version of the app's collection"
        return GateResult(NAME, False, 1.0, 0.0, f"{why}; re-run parity_report", "stale", "= 0")
    differing, queries = int(found["differing"]), int(found["queries"])
    detail = f"{queries - differing} of {queries} queries answer as the app's collection does"
    if differing:
        first = next(row for row in found["rows"] if not row["equal"])
        stage = first["differences"][0]
        causes = ", ".join(f"{n} {c}" for c, n in found["causes"].items()) or "unexplained"
        detail += (f"; chunks behind the differences: {causes}; first: {first['query_id']} "
                   f"{stage['stage']}: {stage['detail']}; import it (`candlefire adopt import`) "
                   "or explain each difference away")  # fmt: skip
    return GateResult(NAME, differing == 0, float(differing), 0.0, detail,
                      f"{differing} / {queries} differ", "= 0")  # fmt: skip
