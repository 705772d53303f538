"""The parity report's plots: small PNGs (report/files.py writes them beside the markdown),
one panel per store.

Rendered with matplotlib's object API on the Agg canvas (no pyplot state, no display); the
same report gives the same bytes (no timestamp or version in the PNG metadata).
"""

from __future__ import annotations

import io
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

from candlefire_pipeline.parity.report.markdown import PLOT_TITLES
from candlefire_pipeline.parity.report.model import ParityReport

PANEL_INCHES = (2.6, 2.3)
DPI = 72
P50_COLOR, P95_COLOR = "#3b6ea8", "#a9c4e4"
#: Overlap histogram bins: 0..1 in 15ths (a top-15 list shares 0..15 PMIDs).
OVERLAP_BINS = [i / 15 for i in range(16)]


def _figure(panels: int, title: str) -> tuple[Figure, list]:
    figure = Figure(figsize=(PANEL_INCHES[0] * panels, PANEL_INCHES[1]), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, panels, squeeze=False, sharey=True)[0]
    figure.suptitle(title, fontsize=9)
    return figure, list(axes)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _style(axis, store: str, role: str) -> None:
    axis.set_title(f"{store} ({role})", fontsize=8)
    axis.tick_params(labelsize=7)
    axis.grid(axis="x", alpha=0.3)


def stages_plot(report: ParityReport) -> bytes:
    """Per store: p95 (light) and p50 (dark) ms of every retrieval stage, horizontal bars."""
    stores = report.stores()
    figure, axes = _figure(len(stores), PLOT_TITLES["stages"])
    table = report.aggregates.get("stage_latency_ms", {})
    for axis, store in zip(axes, stores, strict=True):
        stages = table.get(store, {})
        names = list(stages)[::-1]  # first stage on top
        axis.barh(names, [stages[s]["p95"] for s in names], color=P95_COLOR, label="p95")
        axis.barh(names, [stages[s]["p50"] for s in names], color=P50_COLOR, height=0.5,
                  label="p50")  # fmt: skip
        axis.set_xlabel("ms", fontsize=7)
        _style(axis, store, report.role(store))
    axes[0].legend(fontsize=6, loc="lower right")
    return _png(figure)


def latency_plot(report: ParityReport) -> bytes:
    """Per store: histogram of full-request ms (log bins shared by every panel), p50/p95 lines."""
    stores = report.stores()
    figure, axes = _figure(len(stores), PLOT_TITLES["latency"])
    values = {s: [row.latency_ms[s] for row in report.queries if s in row.latency_ms]
              for s in stores}  # fmt: skip
    every = [max(v, 1e-3) for vs in values.values() for v in vs] or [1.0]
    low, high = math.log10(min(every)), math.log10(max(every)) + 1e-9
    bins = [10 ** (low + (high - low) * i / 20) for i in range(21)]
    for axis, store in zip(axes, stores, strict=True):
        axis.hist(values[store], bins=bins, color=P50_COLOR)
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=12))
        axis.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        axis.xaxis.set_minor_formatter(NullFormatter())
        for stat, style in (("p50", "-"), ("p95", "--")):
            axis.axvline(report.latency(store, stat), color="#c0392b", linestyle=style, lw=1)
        axis.set_xlabel("ms per request (red: p50, dashed: p95)", fontsize=7)
        _style(axis, store, report.role(store))
    axes[0].set_ylabel("requests", fontsize=7)
    return _png(figure)


def overlap_plot(report: ParityReport) -> bytes:
    """Per store: histogram of each query's top-15 overlap with the exact oracle."""
    stores = report.stores()
    figure, axes = _figure(len(stores), PLOT_TITLES["overlap"])
    for axis, store in zip(axes, stores, strict=True):
        overlaps = [row.vs_oracle[store]["overlap"] for row in report.queries
                    if store in row.vs_oracle]  # fmt: skip
        if overlaps:
            axis.hist(overlaps, bins=OVERLAP_BINS, color=P50_COLOR)
        else:
            axis.text(0.5, 0.5, "no oracle", ha="center", va="center", fontsize=8)
        axis.set_xlim(0, 1.0)
        axis.set_xlabel("overlap (1 = same top-15 PMIDs)", fontsize=7)
        _style(axis, store, report.role(store))
    axes[0].set_ylabel("queries", fontsize=7)
    return _png(figure)


PLOTS = {"stages": stages_plot, "latency": latency_plot, "overlap": overlap_plot}


def render_plots(report: ParityReport) -> dict[str, bytes]:
    """plot kind -> PNG bytes; {} for a report with no query or no store timings."""
    if not report.queries or not report.aggregates.get("stage_latency_ms"):
        return {}
    return {kind: render(report) for kind, render in PLOTS.items()}
