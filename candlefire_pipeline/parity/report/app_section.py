"""The parity report's section on the app's own collection (operations/adoption/reference.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from candlefire_pipeline.parity.report.tables import table

if TYPE_CHECKING:
    from candlefire_pipeline.parity.report.model import ParityReport

LISTED = 20


def app_collection_section(report: ParityReport) -> list[str]:
    found = report.app_collection
    if not found:
        return ["No app collection is configured (CANDLEFIRE_APP_CHROMA_PATH / _HOST)."]
    if "error" in found:
        return [f"Not compared: {found['error']}"]
    causes = ", ".join(f"{n} {c}" for c, n in found["causes"].items()) or "none"
    lines = [
        f"candle-fire's search stages on the collection the app serves ({found['where']}, "
        f"fingerprint {found['fingerprint'][:16]}) and on {report.candidate}: "
        f"{found['queries'] - found['differing']} of {found['queries']} queries answer alike "
        f"(every stage, grounding, RRF top 20 and the cited papers; ties within 1e-5 may swap). "
        f"Import: {(found.get('imported') or {}).get('summary', 'not imported')}. Chunks behind "
        f"the differences: {causes}.",
    ]
    rows = [
        (row["query_id"], d["stage"], d["detail"],
         "; ".join(f"{c['chunk_id']} ({c['side']}): {c['cause']}" for c in d["chunks"]))
        for row in found["rows"] if not row["equal"] for d in row["differences"]
    ]  # fmt: skip
    if rows:
        lines += ["", *table(("query", "stage", "difference", "chunks behind it"), rows[:LISTED])]
    return lines
