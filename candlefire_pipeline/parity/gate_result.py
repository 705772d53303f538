"""One gate's verdict (parity/gates.py evaluates them; parity/shadow/gates.py judges live
evidence with the same type)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    value: float
    threshold: float
    detail: str
    #: The value and the threshold in words where the numbers alone would mislead (a version,
    #: checks passed of checked, a gate not required, evidence that cannot be read); empty: the
    #: numbers, shown with the gate's comparison (gate_figures).
    shown_value: str = ""
    shown_threshold: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


#: How each gate's value is held to its threshold (gates that count differences want none).
HELD = {
    "report_is_fresh": "=", "corpus_size": ">=", "queries_with_results": ">=",
    "grounding_agreement": ">=", "mean_overlap": ">=", "p95_ratio": "<=", "ann_recall": ">=",
    "chunk_counts_equal": "=", "stores_hold_current_versions": "=", "pgvector_version": ">=",
    "candlefire_conformance": "=", "shadow_queries": ">=", "shadow_agreement": ">=",
    "shadow_errors": "<=", "rankings_hold": ">=", "app_collection_agreement": "=",
}  # fmt: skip


def gate_figures(gate: GateResult) -> tuple[str, str]:
    """The value and the threshold as every gate table shows them: the words the gate chose,
    else the numbers, the threshold after the comparison it is held to (`>= 0.95`)."""
    value = gate.shown_value or f"{gate.value:.4g}"
    held = HELD.get(gate.name)
    threshold = f"{gate.threshold:.4g}"
    return value, gate.shown_threshold or (f"{held} {threshold}" if held else threshold)


def unknown(name: str, value: float, threshold: float, why: str, held: str = "") -> GateResult:
    """A gate whose evidence cannot be read: a failure, whose value says `unknown` (`held`: the
    threshold in words, when the number would mislead)."""
    return GateResult(name, False, value, threshold, f"unknown: {why}", "unknown", held)


def failed(gates: list[GateResult]) -> list[str]:
    """Names of the gates that did not pass."""
    return [g.name for g in gates if not g.passed]
