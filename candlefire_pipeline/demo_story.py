"""The demo's story: one line per step from materialization metadata, then a summary table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.operations.serving.machine import ServingState, read_state
from candlefire_pipeline.parity.gate_result import GateResult, gate_figures
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES

#: Store asset key -> the store's name in the story and the summary.
STORE_OF_ASSET = {f"{store}_chunks": store for store in STORE_NAMES}
LABEL_WIDTH = 11
NAME_WIDTH = 22


@dataclass(frozen=True)
class ServingSummary:
    report_id: str | None
    gates: list[GateResult]
    serving: ServingState


def serving_summary(settings: Settings) -> ServingSummary:
    """The gates of the latest report and the serving switch (the one place the demo asks)."""
    report, gates = latest_evaluation(settings)
    report_id = report.report_id if report is not None else None
    return ServingSummary(report_id, gates, read_state(settings.serving_file))


def _line(label: str, text: str) -> str:
    return f"    {label:<{LABEL_WIDTH}} {text}"


def _papers(m: Mapping) -> str:
    return (
        f"{m['records_in']} records in -> {m['accepted']} accepted, {m['rejected']} rejected, "
        f"{m['deleted_pmids']} deletions"
    )


def _chunks(m: Mapping) -> str:
    return f"{m['chunks']} chunks from {m['papers']} papers ({m['full_text_papers']} full text)"


def _embeddings(m: Mapping) -> str:
    return (
        f"{m['chunks']} chunks: {m['embedded']} embedded, {m['cached']} cached "
        f"({str(m['model_id']).rsplit('/', 1)[-1]}, {m['dim']}-dim, "
        f"{m['chunks_per_second']:.0f} chunks/s)"
    )


def _store(m: Mapping) -> str:
    return (
        f"+{m['rows_written']} rows -{m['chunks_deleted']} chunks ({m['papers_replaced']} papers "
        f"replaced, {m['papers_unchanged']} unchanged, {m['papers_deleted']} deleted) "
        f"= {m['store_chunks']} chunks"
    )


_PARITY_FIGURES = {
    "grounding_agreement": "grounding",
    "mean_overlap": "overlap",
    "p95_ratio": "p95 ratio",
}


def _parity(m: Mapping) -> str:
    figures = ", ".join(f"{v} {float(m[k]):.3f}" for k, v in _PARITY_FIGURES.items() if k in m)
    return f"report {m['report_id']}: {figures}"


def _serving(m: Mapping) -> str:
    flipped = " (flipped now)" if m.get("flipped_now") else ""
    return f"{m['serving_backend']}{flipped}: {m['verdict']}"


def _shadow(m: Mapping) -> str:
    failed = "" if m.get("failed_gates", "none") == "none" else f"; FAILS {m['failed_gates']}"
    return f"window {m['window_id']}: {m['samples']} live comparisons{failed}"


_STEPS = (
    ("papers", "papers", _papers),
    ("chunks", "chunks", _chunks),
    ("embeddings", "embeddings", _embeddings),
    *((asset, store, _store) for asset, store in STORE_OF_ASSET.items()),
    ("parity_report", "parity", _parity),
    ("serving_backend", "serving", _serving),
    ("shadow_parity", "shadow", _shadow),
)


def step_lines(materialized: Mapping[str, Mapping], checks: Mapping[str, bool]) -> list[str]:
    """One line per materialized asset in DAG order, then one line for the checks."""
    lines = [_line(label, fmt(materialized[a])) for a, label, fmt in _STEPS if a in materialized]
    if checks:
        failed = sorted(name for name, passed in checks.items() if not passed)
        verdict = f"FAILED: {', '.join(failed)}" if failed else "all passed"
        lines.append(_line("checks", f"{len(checks) - len(failed)}/{len(checks)} {verdict}"))
    return lines


def _gate_rows(gates: Sequence[GateResult]) -> list[str]:
    if not gates:
        return ["  gates: no parity report yet"]
    rows = [("gate", "value", "threshold", "result")]
    rows += [(g.name, *gate_figures(g), "pass" if g.passed else "FAIL") for g in gates]
    name, value, threshold = (max(len(row[i]) for row in rows) for i in range(3))
    return [
        f"  {g:<{max(name, NAME_WIDTH)}} {v:>{max(value, 14)}}  {t:<{threshold}}  {r}"
        for g, v, t, r in rows
    ]


def summary_lines(store_chunks: Mapping[str, int | None], summary: ServingSummary) -> list[str]:
    """Chunks per store, each gate with value and threshold, the serving state, what next."""
    lines = ["", "Summary", f"  {'store':<{NAME_WIDTH}} {'chunks':>14}"]
    for store, count in store_chunks.items():
        lines.append(f"  {store:<{NAME_WIDTH}} {'-' if count is None else count:>14}")
    lines += _gate_rows(summary.gates)
    lines.append(f"  serving backend: {summary.serving.describe()}")
    lines += [
        "",
        "Next",
        "  make ui                                   asset graph, runs, parity report, gates",
        '  .venv/bin/candlefire query "tofersen in SOD1 ALS" --entity SOD1 --term SPG302',
        "  .venv/bin/candlefire status               serving backend, last report, store health",
    ]
    return lines
