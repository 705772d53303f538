"""The gates of a comparison between two generations (what its promotion needs).

The same definitions as the flip's gates where they mean the same (freshness, evidence,
grounding, latency, ANN recall); one gate, `rankings_hold`, depends on the comparison's kind:
- quality (the model or the chunker differs, rankings legitimately change): mean nDCG@10 on a
  judged set falls by at most CANDLEFIRE_GENERATION_NDCG_DROP;
- overlap (same vectors, another layout): today's mean top-15 overlap with the reference.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from candlefire_pipeline.parity.gate_result import unknown
from candlefire_pipeline.parity.gates import GateResult, evaluate_gates, freshness
from candlefire_pipeline.settings import GenerationSettings, ParityThresholds

if TYPE_CHECKING:
    from candlefire_pipeline.parity.generation_report import GenerationReport

QUALITY, OVERLAP = "quality", "overlap"

#: Every gate of a generation comparison, in evaluation order (the blocking checks' texts).
GENERATION_GATES: dict[str, str] = {
    "report_is_fresh": "The comparison ran on the current ledgers of both generations.",
    "corpus_size": "Reference and candidate hold at least the minimum number of chunks.",
    "queries_with_results": "At least the minimum number of queries return results on both.",
    "grounding_agreement": "Grounding booleans agree exactly (1.0; the parity threshold when "
    "the chunker differs).",
    "rankings_hold": "quality: nDCG@10 on the judged set falls by at most the threshold; "
    "overlap: mean top-15 overlap with the reference is at least the parity threshold.",
    "p95_ratio": "Candidate store-side p95 latency is at most the threshold times the reference's.",
    "ann_recall": "Candidate ANN recall@15 against its own exact oracle is at least the threshold.",
    "stores_hold_current_versions": "Every fed store holds exactly the candidate generation's "
    "current version of every paper, and no ingested drop is missing from it.",
}


def _rankings(report: GenerationReport, parity_gates: dict, generations: GenerationSettings):
    if report.kind == OVERLAP:
        gate = parity_gates["mean_overlap"]
        return replace(gate, name="rankings_hold", detail=f"overlap comparison: {gate.detail}")
    quality = report.quality or {}
    threshold = -generations.ndcg_drop
    if "error" in quality or not quality.get("judged"):
        why = quality.get("error") or "no judged query has a relevant paper in the corpus"
        # -1.0: the worst a delta of nDCG can be, so an unknown quality reads as a failure
        return unknown("rankings_hold", -1.0, threshold, why)
    delta = float(quality["delta"])
    detail = (
        f"nDCG@10 {quality['reference_ndcg']:.4f} -> {quality['candidate_ndcg']:.4f} "
        f"(delta {delta:+.4f}, 95% CI [{quality['ci_low']:+.4f}, {quality['ci_high']:+.4f}], "
        f"{quality['judged']} judged queries, {quality['bootstrap_samples']} resamples)"
    )
    return GateResult("rankings_hold", delta >= threshold, delta, threshold, detail)


def _grounding(report: GenerationReport, gate: GateResult) -> GateResult:
    """Substring grounding does not depend on the model: exactly 1.0 unless the chunker moved
    text between chunks."""
    if report.candidate["identity"]["chunker"] != report.reference["identity"]["chunker"]:
        return gate
    checks = int(report.parity_report().aggregates.get("grounding_checks", 0))
    return replace(gate, passed=checks > 0 and gate.value >= 1.0, threshold=1.0)


def _current_versions(report: GenerationReport, lag_now: dict[str, int] | None) -> GateResult:
    name = "stores_hold_current_versions"
    if lag_now is None:
        return unknown(name, 1.0, 0.0, "the ledger cannot be read now")
    if not report.store_diffs:
        return unknown(name, 1.0, 0.0, "no store was compared with the ledger")
    parts, total = [], 0
    for store, diff in sorted(report.store_diffs.items()):
        if "error" in diff:
            parts.append(f"{store}: unreachable ({diff['error']})")
            total += 1
            continue
        kinds = {k: int(diff.get(k, 0)) for k in ("missing", "orphaned", "stale")}
        kinds["drops behind"] = int(lag_now.get(store, 0))
        total += sum(kinds.values())
        parts.append(f"{store}: " + (", ".join(f"{n} {k}" for k, n in kinds.items() if n)
                                     or "exact"))  # fmt: skip
    missing_stores = sorted(set(lag_now) - set(report.store_diffs))
    total += len(missing_stores)
    parts += [f"{store}: not compared" for store in missing_stores]
    return GateResult(name, total == 0, float(total), 0.0, "; ".join(parts))


def evaluate_generation_gates(
    report: GenerationReport,
    thresholds: ParityThresholds,
    generations: GenerationSettings,
    ledger_now: dict | None,
    lag_now: dict[str, int] | None,
) -> list[GateResult]:
    """Every gate of GENERATION_GATES for `report`, judged with the ledger and lag read now."""
    parity = {g.name: g for g in evaluate_gates(report.parity_report(), thresholds, None)}
    return [
        freshness(report, ledger_now),
        parity["corpus_size"],
        parity["queries_with_results"],
        _grounding(report, parity["grounding_agreement"]),
        _rankings(report, parity, generations),
        parity["p95_ratio"],
        parity["ann_recall"],
        _current_versions(report, lag_now),
    ]
