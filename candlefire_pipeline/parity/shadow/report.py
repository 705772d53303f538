"""A shadow window on disk, beside the parity reports: JSON, Markdown and PNG plots.

shadow-<id>.json is written last (load_latest_window only sees a window once its files exist);
only the newest KEEP_WINDOWS windows are kept (one a quarter hour for a day by default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.parity.gates import gate_table_markdown
from candlefire_pipeline.parity.report.plots import OVERLAP_BINS, P50_COLOR
from candlefire_pipeline.parity.report.plots import _figure as figure_of
from candlefire_pipeline.parity.report.plots import _png as png_of
from candlefire_pipeline.parity.shadow.window import ShadowWindow, TargetWindow, window_paths

KEEP_WINDOWS = 96
SERVED_COLOR, SHADOW_COLOR = P50_COLOR, "#e08a3c"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def targets_table(window: ShadowWindow) -> str:
    lines = [
        "| served -> shadow | samples | compared | errors | mean overlap | min overlap | "
        "grounding | keyword | served p95 ms | shadow p95 ms | p95 ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in window.targets:
        lines.append(
            f"| {t.pair} | {t.samples} | {t.compared} | {t.errors} | {_fmt(t.mean_overlap)} | "
            f"{_fmt(t.min_overlap)} | {_fmt(t.grounding_agreement)} | "
            f"{_fmt(t.keyword_agreement)} | {_fmt(t.served_p95_ms, 1)} | "
            f"{_fmt(t.shadow_p95_ms, 1)} | {_fmt(t.p95_ratio, 2)} |"
        )
    return "\n".join(lines) if window.targets else "No shadow comparison in this window."


def worst_table(target: TargetWindow) -> list[str]:
    if not target.worst:
        return [f"{target.pair}: no divergence."]
    lines = [f"{target.pair}:", "", "| when | query | overlap | grounding | causes |",
             "|---|---|---|---|---|"]  # fmt: skip
    for w in target.worst:
        causes = ", ".join(w["causes"]) or "-"
        lines.append(
            f"| {w['recorded_at'][:19]} | {_cell(w['query'][:80])} | {_fmt(w['overlap'])} | "
            f"{'agree' if w['grounding_equal'] else 'DIFFER'} | {_cell(causes)} |"
        )
    return lines


def window_markdown(
    window: ShadowWindow, gates: list[GateResult], image_link: Callable[[str], str], plots: dict
) -> str:
    lines = [
        f"# Shadow window {window.window_id}",
        "",
        f"Live requests replayed on the stores that do not serve, {window.since[:19]} .. "
        f"{window.until[:19]} UTC ({window.window_minutes} min).",
    ]
    if window.note:
        lines += ["", f"**Note:** {window.note}"]
    lines += ["", targets_table(window), "", "## Gates (live evidence)", ""]
    lines += [gate_table_markdown(gates), "", "## Worst divergences (traced causes)", ""]
    for target in window.targets:
        lines += [*worst_table(target), ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{kind}]({image_link(name)})" for kind, name in plots.items()]
    return "\n".join(lines) + "\n"


def overlap_plot(window: ShadowWindow) -> bytes:
    """Per pair: histogram of each live request's top-15 overlap."""
    figure, axes = figure_of(len(window.targets), "Top-15 overlap of live requests")
    for axis, target in zip(axes, window.targets, strict=True):
        axis.hist(target.overlaps, bins=OVERLAP_BINS, color=SERVED_COLOR)
        axis.set_xlim(0, 1.0)
        axis.set_title(target.pair, fontsize=8)
        axis.set_xlabel("overlap (1 = same top-15 PMIDs)", fontsize=7)
        axis.tick_params(labelsize=7)
    axes[0].set_ylabel("requests", fontsize=7)
    return png_of(figure)


def latency_plot(window: ShadowWindow) -> bytes:
    """Per pair: served and shadow ms per request (log bins shared by every panel)."""
    figure, axes = figure_of(len(window.targets), "retrieve() ms: served vs shadow")
    every = [max(v, 1e-3) for t in window.targets for v in (*t.served_ms, *t.shadow_ms)] or [1.0]
    low, high = math.log10(min(every)), math.log10(max(every)) + 1e-9
    bins = [10 ** (low + (high - low) * i / 20) for i in range(21)]
    for axis, target in zip(axes, window.targets, strict=True):
        axis.hist(target.served_ms, bins=bins, color=SERVED_COLOR, alpha=0.7, label="served")
        axis.hist(target.shadow_ms, bins=bins, color=SHADOW_COLOR, alpha=0.7, label="shadow")
        axis.set_xscale("log")
        axis.set_title(target.pair, fontsize=8)
        axis.set_xlabel("ms per request", fontsize=7)
        axis.tick_params(labelsize=7)
    axes[0].set_ylabel("requests", fontsize=7)
    axes[0].legend(fontsize=6)
    return png_of(figure)


def render_plots(window: ShadowWindow) -> dict[str, bytes]:
    """plot kind -> PNG; {} when no pair has a successful comparison."""
    if not any(t.compared for t in window.targets):
        return {}
    shown = ShadowWindow(**{**vars(window), "targets": [t for t in window.targets if t.compared]})
    return {"overlap": overlap_plot(shown), "latency": latency_plot(shown)}


def write_window(
    window: ShadowWindow, gates: list[GateResult], reports_dir: Path
) -> tuple[Path, Path, dict[str, str]]:
    """Write the plots, shadow-<id>.md and .json; prune old windows; (json_path, md_path,
    plot kind -> PNG file name)."""
    reports_dir = Path(reports_dir)
    plots = {}
    for kind, png in render_plots(window).items():
        plots[kind] = f"shadow-{window.window_id}-{kind}.png"
        write_atomic(reports_dir / plots[kind], png)
    markdown = window_markdown(window, gates, lambda name: name, plots)
    md_path = write_atomic(reports_dir / f"shadow-{window.window_id}.md", markdown)
    json_path = write_atomic(reports_dir / f"shadow-{window.window_id}.json", window.to_json())
    for old in window_paths(reports_dir)[:-KEEP_WINDOWS]:
        for path in reports_dir.glob(old.stem + "*"):
            path.unlink(missing_ok=True)
    return json_path, md_path, plots
