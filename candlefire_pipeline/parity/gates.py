"""The one definition of the gates that decide the flip: evidence, agreement, speed, freshness.

`evaluate_gates` is a pure function of a report, the thresholds and the ledger state read now;
the report file, the blocking checks, `candlefire status` and the switch all use its result.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from candlefire_pipeline.backends.pg.version import (
    FLOOR,
    ServerVersions,
    dotted,
    missing_fixes,
    parse_version,
)
from candlefire_pipeline.parity import app_gate
from candlefire_pipeline.parity.gate_result import GateResult, failed, gate_figures, unknown
from candlefire_pipeline.parity.shadow.gates import SHADOW_GATES, shadow_gates
from candlefire_pipeline.settings import ParityThresholds

if TYPE_CHECKING:
    from candlefire_pipeline.parity.report.model import ParityReport
    from candlefire_pipeline.parity.shadow.window import ShadowWindow

__all__ = ["GATES", "GateResult", "evaluate_gates", "failed", "gate_table_markdown"]

#: store -> {batch_key: applied_at}: which batches each store had applied (corpus/ledger.snapshot)
Ledger = dict[str, dict[str, float]]

#: Every gate, in evaluation order, with what it promises (the blocking checks' descriptions).
GATES: dict[str, str] = {
    "report_is_fresh": "The report ran on the current ledger: no batch was applied to any store "
    "after the report read the ledger (unknown or empty ledger = FAIL).",
    "corpus_size": "Reference and candidate hold at least the minimum number of chunks "
    "(empty = FAIL).",
    "queries_with_results": "At least the minimum number of queries return results on the "
    "reference, the candidate and the oracle.",
    "grounding_agreement": "Grounding booleans agree on at least the threshold share of checks "
    "(zero checks = FAIL).",
    "mean_overlap": "Mean top-15 PMID overlap with the reference is at least the threshold.",
    "p95_ratio": "Candidate store-side p95 latency is at most the threshold times the reference's.",
    "ann_recall": "Candidate ANN recall@15 against the exact oracle is at least the threshold.",
    "chunk_counts_equal": "Reference and candidate hold the same chunk ids with the same content.",
    "stores_hold_current_versions": "Reference and candidate hold exactly the ledger's current "
    "version of every paper (the chunk ids and content hashes of the batches applied).",
    "pgvector_version": f"pgvector is at least {dotted(FLOOR)} on the server the report ran on "
    "and on the server now (0.8.3 fixed possible HNSW index corruption during vacuum, 0.8.4 the "
    "`hnsw graph not repaired` error); unknown = FAIL.",
    "candlefire_conformance": "The candidate answers candle-fire's recorded queries as "
    "candle-fire's own retriever did, every stage of every query (only ties within 1e-5 may "
    "swap; neighbours candle-fire's own Chroma graph missed are proven so); no fixtures = FAIL.",
    app_gate.NAME: app_gate.DESCRIPTION,
    **SHADOW_GATES,
}


def evaluate_gates(
    report: ParityReport,
    thresholds: ParityThresholds,
    ledger_now: Ledger | None,
    pgvector_now: ServerVersions | None = None,
    shadow: ShadowWindow | None = None,
    now: datetime | None = None,
    adoption: dict | None = None,
) -> list[GateResult]:
    """Every gate of GATES for `report`; ledger_now / pgvector_now (the candidate server's
    versions) None means they could not be read now; `shadow` is the latest window of live
    comparisons (None: there is none), judged at `now`; `adoption` the app collection's state
    now (operations.adoption.reference.adoption_now; {} or None: none configured)."""
    retired = ", ".join(f"{s} retired since {r['since']}" for s, r in report.retired.items())
    live = shadow_gates(shadow, thresholds, report.reference, report.candidate, now,
                        retired=retired or None)  # fmt: skip
    return [
        freshness(report, ledger_now),
        _corpus_size(report, thresholds),
        _queries_with_results(report, thresholds),
        _grounding(report, thresholds),
        _mean_overlap(report, thresholds),
        _p95_ratio(report, thresholds),
        _ann_recall(report, thresholds),
        _chunk_counts_equal(report),
        _current_versions(report),
        pgvector_version(report, pgvector_now),
        _conformance(report),
        app_gate.app_collection_gate(report, adoption),
        *live,
    ]


def stores_of(report: ParityReport) -> list[str]:
    """The stores the gates judge: reference and candidate (only the candidate when the
    reference is retired and the exact oracle stands in). Evaluated stores (e.g. Qdrant) have
    their own column in the report but never pass or fail a gate."""
    return [s for s in (report.reference, report.candidate) if s != report.oracle]


def _answering(report: ParityReport) -> list[str]:
    """The backends that must answer a query for it to count: the gated stores and the oracle."""
    return [b for b in report.backends if b not in report.evaluated_stores()]


def freshness(report: ParityReport, ledger_now: Ledger | None) -> GateResult:
    """Fresh = the ledger now is exactly the ledger the report read before it ran."""
    recorded = (report.ledger or {}).get("applied")
    name, threshold = "report_is_fresh", 0.0
    if recorded is None:
        return unknown(name, 1.0, threshold, "the report does not record the ledger state it "
                       "ran on; re-run parity_report")  # fmt: skip
    if ledger_now is None:
        return unknown(name, 1.0, threshold, "the ledger cannot be read now")
    if not any(recorded.values()):
        return GateResult(name, False, 1.0, threshold, "no batch had been applied to any store "
                          "when the report ran: nothing to be fresh about",
                          shown_value="empty ledger")  # fmt: skip
    changed = sorted(
        f"{store}:{batch}"
        for store in set(recorded) | set(ledger_now)
        for batch in set(recorded.get(store, {})) | set(ledger_now.get(store, {}))
        if recorded.get(store, {}).get(batch) != ledger_now.get(store, {}).get(batch)
    )
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        detail = f"applied after the report read the ledger: {shown}; re-run parity_report"
    else:
        batches = len({b for applied in recorded.values() for b in applied})
        detail = f"the ledger is unchanged since the report read it ({batches} batches)"
    return GateResult(name, not changed, float(len(changed)), threshold, detail)


def _corpus_size(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    counts = {s: int(report.chunk_counts.get(s, 0)) for s in stores_of(report)}
    smallest = min(counts.values(), default=0)
    empty = [s for s, n in counts.items() if n == 0]
    detail = ", ".join(f"{s} {n}" for s, n in counts.items()) + " chunks"
    if empty:
        detail += f"; empty: {', '.join(empty)}"
    return GateResult(
        "corpus_size", smallest >= thresholds.min_corpus_chunks, float(smallest),
        float(thresholds.min_corpus_chunks), detail,
    )  # fmt: skip


def _queries_with_results(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    backends = _answering(report)
    answered = sum(all(row.top.get(b) for b in backends) for row in report.queries)
    return GateResult(
        "queries_with_results", answered >= thresholds.min_queries_with_results, float(answered),
        float(thresholds.min_queries_with_results),
        f"{answered} of {len(report.queries)} queries return results on {', '.join(backends)}",
    )  # fmt: skip


def _grounding(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    checks = int(report.aggregates.get("grounding_checks", 0))
    value = float(report.aggregates["grounding_agreement"]) if checks else 0.0
    detail = (
        f"{checks} grounding booleans compared"
        if checks
        else "no grounding checks: no query has terms, nothing was compared"
    )
    passed = checks > 0 and value >= thresholds.grounding_agreement
    return GateResult("grounding_agreement", passed, value, thresholds.grounding_agreement, detail)


def _mean_overlap(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    value = float(report.aggregates["mean_overlap"]) if report.queries else 0.0
    return GateResult(
        "mean_overlap", value >= thresholds.mean_overlap, value, thresholds.mean_overlap,
        f"mean top-15 PMID overlap over {len(report.queries)} queries "
        f"(min {float(report.aggregates.get('min_overlap', 0.0)):.3f})",
    )  # fmt: skip


def _p95_ratio(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    ratio = report.p95_ratio()
    baseline = report.p95_baseline() if report.reference == report.oracle else None
    if baseline is None:
        against = f"{report.reference} {report.latency(report.reference, 'p95', True):.1f} ms"
    else:  # the retired store's own p95 when it was retired: a speed floor that stays
        store, ms, report_id = baseline
        against = f"{store} {ms:.1f} ms in report {report_id} (retired on it)"
    return GateResult(
        "p95_ratio", ratio <= thresholds.p95_ratio, ratio, thresholds.p95_ratio,
        f"store-side p95 (query embedding excluded): {report.candidate} "
        f"{report.latency(report.candidate, 'p95', True):.1f} ms vs {against}",
    )  # fmt: skip


def _ann_recall(report: ParityReport, thresholds: ParityThresholds) -> GateResult:
    recall = report.aggregates.get("ann_recall", {}).get(report.candidate)
    if recall is None:
        return unknown("ann_recall", 0.0, thresholds.ann_recall,
                       "the report ran without the exact oracle")  # fmt: skip
    return GateResult(
        "ann_recall", float(recall) >= thresholds.ann_recall, float(recall), thresholds.ann_recall,
        f"{report.candidate} semantic top-15 chunks vs the exact oracle, mean over "
        f"{len(report.queries)} queries",
    )  # fmt: skip


def _chunk_counts_equal(report: ParityReport) -> GateResult:
    counts = report.chunk_counts
    ref_count, cand_count = counts[report.reference], counts[report.candidate]
    differing = int(report.inventory.get("differing", 0))
    return GateResult(
        "chunk_counts_equal", ref_count == cand_count and differing == 0,
        float(abs(cand_count - ref_count) + differing), 0.0,
        f"{report.reference} {ref_count} chunks, {report.candidate} {cand_count}; "
        f"{differing} chunk ids missing or different on one side",
    )  # fmt: skip


def _current_versions(report: ParityReport) -> GateResult:
    name = "stores_hold_current_versions"
    diffs = report.store_diffs or {}
    unread = [s for s in stores_of(report) if s not in diffs]
    if unread:
        return unknown(name, 1.0, 0.0, f"no ledger comparison for {', '.join(unread)}; "
                       "re-run parity_report")  # fmt: skip
    if not any((report.ledger or {}).get("applied", {}).values()):
        return GateResult(name, False, 1.0, 0.0, "the ledger has no applied batch",
                          shown_value="empty ledger")  # fmt: skip
    off = {
        s: {k: int(diffs[s].get(k, 0)) for k in ("missing", "orphaned", "stale")}
        for s in stores_of(report)
    }
    total = sum(sum(kinds.values()) for kinds in off.values())
    detail = "; ".join(
        f"{s}: " + (", ".join(f"{n} {k}" for k, n in kinds.items() if n) or "exact")
        for s, kinds in off.items()
    )
    return GateResult(name, total == 0, float(total), 0.0, detail)


def pgvector_version(report: ParityReport, now: ServerVersions | None) -> GateResult:
    """The floor on the server the report ran on (recorded) and on the server now (read)."""
    name, floor = "pgvector_version", f"floor {dotted(FLOOR)}"
    held = f">= {dotted(FLOOR)}"
    ran_on = ServerVersions.from_dict((report.servers or {}).get(report.candidate))
    if ran_on is None or ran_on.pgvector is None:
        return unknown(name, 1.0, 0.0, "the report does not record the pgvector version it ran "
                       "on; re-run parity_report", held)  # fmt: skip
    if now is None or now.pgvector is None:
        return unknown(name, 1.0, 0.0, f"the pgvector version of the {report.candidate} server "
                       "cannot be read now", held)  # fmt: skip
    lacking = max(len(missing_fixes(v.pgvector)) for v in (ran_on, now))
    if now.below_floor():
        detail = f"the {report.candidate} server now: {now.floor_problem()}"
    elif ran_on.below_floor():
        detail = (
            f"the report ran on {ran_on.floor_problem()}; the server now runs pgvector "
            f"{now.pgvector}: re-run parity_report"
        )
    else:
        detail = f"{ran_on.pgvector} when the report ran, {now.pgvector} now ({floor})"
    # the lower of the two is the one the floor judges
    lowest = min((ran_on.pgvector, now.pgvector), key=parse_version)
    return GateResult(name, lacking == 0, float(lacking), 0.0, detail, lowest, held)


def _conformance(report: ParityReport) -> GateResult:
    name, store = "candlefire_conformance", report.candidate
    found = (report.conformance or {}).get(store)
    if not found:
        return unknown(name, 1.0, 0.0, f"the report has no conformance of {store}; re-run "
                       "parity_report", "all")  # fmt: skip
    if "error" in found:
        return GateResult(name, False, 1.0, 0.0, f"{store}: {found['error']}", "error", "all")
    differing, queries = int(found["differing"]), int(found["queries"])
    if queries == 0:
        return GateResult(name, False, 1.0, 0.0, f"{store}: no recorded query was checked",
                          "none checked", "all")  # fmt: skip
    checks = sum(sum(tally.values()) for tally in found["counts"].values())
    detail = f"{store}: {checks - differing} of {checks} checks of {queries} recorded queries " \
        f"as candle-fire answered ({found['swaps']} tie swaps)"  # fmt: skip
    if differing:
        first = found["failures"][0]
        detail += f"; first difference: {first['query_id']} {first['check']}: {first['detail']}"
    shown = f"{checks - differing} / {checks}"  # checks passed / checked
    return GateResult(name, differing == 0, float(differing), 0.0, detail, shown, "all")


def gate_rows(gates: list[GateResult]) -> list[tuple[str, str, str, str, str]]:
    """(gate, result, value, threshold, detail) per gate, formatted for a table."""
    return [(g.name, "pass" if g.passed else "FAIL", *gate_figures(g), g.detail) for g in gates]


#: The Dagster UI shows a Markdown metadata value inline only below this many characters (else
#: behind a "[Show Markdown]" dialog).
INLINE_MARKDOWN_CHARS = 1000


def gate_table_markdown(gates: list[GateResult], limit: int | None = None) -> str:
    """The gate table as Markdown (report page, Dagster metadata). With `limit`, the longest
    details are cut short (…) until the table is shorter than `limit` characters: those of
    passing gates first, so a failing gate keeps its reason as long as it can (the full details
    stay in the report)."""

    def cell(value: str) -> str:
        return value.replace("|", "\\|").replace("\n", " ")

    def cut(text: str, room: int) -> str:
        return text if len(text) <= room else text[: max(room - 1, 0)] + "…"

    def render(rooms: dict[str, int]) -> str:
        lines = ["| gate | result | value | threshold | detail |", "|---|---|---|---|---|"]
        for *head, detail in rows:
            lines.append("| " + " | ".join([*head, cut(detail, rooms[head[1]])]) + " |")
        return "\n".join(lines)

    rows = [[cell(v) for v in row] for row in gate_rows(gates)]
    longest = max((len(row[4]) for row in rows), default=0)
    rooms = {"pass": longest, "FAIL": longest}
    for result in ("pass", "FAIL"):
        while limit is not None and rooms[result] > 3 and len(render(rooms)) >= limit:
            rooms[result] -= 1
    return render(rooms)


def format_gate_table(gates: list[GateResult]) -> str:
    """The gate table for a terminal (`candlefire status`, `candlefire promote`)."""
    rows = [("gate", "result", "value", "threshold", "detail"), *gate_rows(gates)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  " + "  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in rows
    )


def gates_from_dicts(rows: list[dict]) -> list[GateResult]:
    return [GateResult(**row) for row in rows]
