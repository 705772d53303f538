"""The live-evidence gates: the latest shadow window of the reference/candidate pair, judged with
the parity thresholds. Part of the one evaluation in parity/gates.py; shadow_parity's checks
and the serving watch use the same functions.

CANDLEFIRE_PARITY_MIN_SHADOW_QUERIES = 0 (the default) means live evidence is not required:
then too few comparisons pass, and say so. Once required, a window with fewer comparisons (or
none, or a stale one) fails: never a vacuous pass. Enough comparisons that disagree fail
whether required or not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.settings import ParityThresholds

if TYPE_CHECKING:
    from candlefire_pipeline.parity.shadow.window import ShadowWindow, TargetWindow

SHADOW_GATES: dict[str, str] = {
    "shadow_queries": "Live evidence: the latest shadow window holds at least the minimum number "
    "of comparisons between reference and candidate (0 = not required; required and fewer, "
    "none or stale = FAIL).",
    "shadow_agreement": "Live traffic: mean top-15 overlap and grounding agreement of the "
    "shadow comparisons meet the parity thresholds (judged once the window holds enough).",
    "shadow_errors": "Live traffic: at most the threshold share of shadow reads failed "
    "(judged once the window holds enough).",
}
#: A window older than this many window lengths is stale: it no longer speaks for the stores.
STALE_AFTER_WINDOWS = 2


def live_pair(
    window: ShadowWindow | None, a: str, b: str, now: datetime | None = None
) -> tuple[TargetWindow | None, str]:
    """The pair's figures in the latest window if it is recent, and a sentence saying which."""
    if window is None:
        return None, "no shadow window yet"
    now = now or datetime.now(UTC)
    until = datetime.fromisoformat(window.until)
    if now - until > timedelta(minutes=STALE_AFTER_WINDOWS * window.window_minutes):
        return None, f"the latest shadow window ({window.window_id}, until {window.until}) is stale"
    pair = window.between(a, b)
    if pair is None:
        return None, f"shadow window {window.window_id} holds no {a}/{b} comparison"
    return pair, f"shadow window {window.window_id} ({pair.pair}, {window.window_minutes} min)"


def judged_floor(thresholds: ParityThresholds) -> int:
    """Comparisons a window needs before its agreement is judged: the required minimum, or (not
    required) the parity report's own evidence minimum."""
    return thresholds.min_shadow_queries or thresholds.min_queries_with_results


def shadow_gates(
    window: ShadowWindow | None,
    thresholds: ParityThresholds,
    reference: str,
    candidate: str,
    now: datetime | None = None,
    retired: str | None = None,
) -> list[GateResult]:
    """shadow_queries, shadow_agreement, shadow_errors for the reference/candidate pair.

    `retired` (what is retired, since when): no shadow read is offered a retired store, so live
    traffic has nothing to be compared with; each gate says so and passes (the report's gates
    still judge the candidate against the exact oracle and candle-fire's recorded answers)."""
    if retired:
        detail = f"{retired}: no shadow reads to judge (the report's gates judge {candidate})"
        return [GateResult(name, True, 0.0, 0.0, detail, "-", "not judged (retired)")
                for name in SHADOW_GATES]  # fmt: skip
    pair, where = live_pair(window, reference, candidate, now)
    return [
        _queries(pair, where, thresholds),
        agreement(pair, where, thresholds),
        _errors(pair, where, thresholds),
    ]


def _queries(pair: TargetWindow | None, where: str, thresholds: ParityThresholds) -> GateResult:
    required = thresholds.min_shadow_queries
    compared = pair.compared if pair else 0
    if not required:
        detail = f"not required (minimum 0); {compared} in {where}"
        return GateResult("shadow_queries", True, float(compared), 0.0, detail,
                          shown_threshold="not required")  # fmt: skip
    detail = f"{compared} live comparisons in {where}"
    return GateResult("shadow_queries", compared >= required, float(compared), float(required),
                      detail)  # fmt: skip


def _unjudged(
    name: str, where: str, thresholds: ParityThresholds, count: int, counted: str
) -> GateResult:
    """Too few comparisons to judge: a pass only when live evidence is not required. The value
    is then a count of `counted`, not the agreement or error rate the gate judges."""
    required, floor = thresholds.min_shadow_queries > 0, judged_floor(thresholds)
    detail = f"too few to judge ({count} < {floor}) in {where}"
    detail += "" if required else "; not required"
    held = f">= {floor} to judge" if required else "not required"
    return GateResult(name, not required, float(count), float(floor), detail,
                      f"{count} {counted}", held)  # fmt: skip


def agreement(pair: TargetWindow | None, where: str, thresholds: ParityThresholds) -> GateResult:
    """Overlap and grounding agreement over the comparisons that succeeded."""
    compared = pair.compared if pair else 0
    if compared < judged_floor(thresholds):
        return _unjudged("shadow_agreement", where, thresholds, compared, "compared")
    problems = []
    if pair.mean_overlap < thresholds.mean_overlap:
        problems.append(f"mean overlap {pair.mean_overlap:.3f} < {thresholds.mean_overlap:g}")
    if pair.grounding_agreement < thresholds.grounding_agreement:
        problems.append(
            f"grounding agreement {pair.grounding_agreement:.3f} < "
            f"{thresholds.grounding_agreement:g}"
        )
    detail = "; ".join(problems) or (
        f"mean overlap {pair.mean_overlap:.3f} (min {pair.min_overlap:.3f}), grounding "
        f"{pair.grounding_agreement:.3f} over {compared} comparisons"
    )
    return GateResult("shadow_agreement", not problems, float(pair.mean_overlap),
                      thresholds.mean_overlap, f"{detail} in {where}")  # fmt: skip


def _errors(pair: TargetWindow | None, where: str, thresholds: ParityThresholds) -> GateResult:
    samples = pair.samples if pair else 0
    if samples < judged_floor(thresholds):
        return _unjudged("shadow_errors", where, thresholds, samples, "reads")
    rate = pair.error_rate
    return GateResult(
        "shadow_errors", rate <= thresholds.shadow_error_rate, rate, thresholds.shadow_error_rate,
        f"{pair.errors} of {samples} shadow reads failed in {where}",
    )  # fmt: skip
