"""The parity report as Markdown: headline, gates, one column per store, plots, divergences."""

from __future__ import annotations

from collections.abc import Callable

from candlefire_pipeline.parity.gates import gate_table_markdown, gates_from_dicts
from candlefire_pipeline.parity.report.app_section import app_collection_section
from candlefire_pipeline.parity.report.model import Divergence, ParityReport
from candlefire_pipeline.parity.report.tables import table

#: plot kind -> what it shows (parity/report/plots.py renders them in this order)
PLOT_TITLES = {
    "stages": "Latency per retrieval stage, p50 and p95 (ms)",
    "latency": "Latency of full requests (retrieve(), ms)",
    "overlap": "Per-query top-15 overlap with the exact oracle",
}


def report_markdown(
    report: ParityReport, image_link: Callable[[str], str] = lambda name: name
) -> str:
    """The report page; image_link(file name) -> link target (default: the file beside it)."""
    return "\n".join(
        [
            f"# Parity report {report.report_id}",
            "",
            f"Created {report.created_at}. Reference `{report.reference}`, candidate "
            f"`{report.candidate}`, oracle `{report.oracle or '-'}`{_retired_said(report)}; "
            f"{len(report.queries)} queries. Chunks: "
            + ", ".join(f"{b} {n}" for b, n in report.chunk_counts.items())
            + ".",
            "",
            *table(("metric", "value"), [(k, f"{v:.4g}") for k, v in report.headline().items()]),
            "",
            "## Gates",
            "",
            *gates_section(report),
            "",
            "## Conformance with candle-fire's recorded answers",
            "",
            *conformance_section(report),
            "",
            "## The app's own collection",
            "",
            *app_collection_section(report),
            "",
            "## Stores against the exact oracle",
            "",
            *stores_section(report),
            *plots_section(report, image_link),
            "## Queries",
            "",
            *query_table(report),
            "",
            f"## Divergences, {report.reference} vs {report.candidate} ({len(report.divergences)})",
            "",
            *divergence_table(report.divergences),
            "",
            *store_divergence_sections(report),
        ]
    )


def _retired_said(report: ParityReport) -> str:
    said = [f"{s} retired since {r['since']}" for s, r in report.retired.items()]
    return f" ({'; '.join(said)}: not written, not compared)" if said else ""


def gates_section(report: ParityReport) -> list[str]:
    if not report.gates:
        return ["Not evaluated: this report was not produced by a parity run; it cannot flip."]
    thresholds = ", ".join(f"{k} {v:g}" for k, v in sorted(report.thresholds.items()))
    return [
        f"Thresholds used: {thresholds}. Freshness is checked again against the ledger whenever "
        "the report is used (blocking checks, `candlefire status`, the switch). The gates compare "
        f"{report.reference} and {report.candidate} only{_retired_said(report)}.",
        "",
        gate_table_markdown(gates_from_dicts(report.gates)),
    ]


def conformance_section(report: ParityReport) -> list[str]:
    """Per store: the recorded checks answered as candle-fire did, and every exception."""
    if not report.conformance:
        return ["No conformance in this report (it predates the check): it cannot flip."]
    rows, failures = [], []
    for store, found in report.conformance.items():
        if "error" in found:
            rows.append((store, "-", "-", "-", "-", "-", "-", found["error"]))
            continue
        verdicts = {v: sum(t.get(v, 0) for t in found["counts"].values())
                    for v in ("identical", "reference_miss", "store_miss", "differs")}  # fmt: skip
        checks = sum(verdicts.values())
        rows.append((
            store, found["queries"], f"{checks - found['differing']}/{checks}", found["swaps"],
            f"{verdicts['reference_miss']} ({found['misses']} chunks)", verdicts["store_miss"],
            verdicts["differs"], "cached" if found.get("cached") else "run now",
        ))  # fmt: skip
        failures += [(store, f["query_id"], f["check"], f["detail"]) for f in found["failures"]]
    lines = [
        "Every recorded query of candle-fire's fixtures through retrieve() on a scratch target "
        "of each store, configured like the store itself. Identical: every row as candle-fire "
        "returned it (rows within 1e-5 may swap: tie swaps). Candle-fire's misses: lists where "
        "candle-fire's own Chroma graph left out neighbours (proven from its recorded vectors). "
        "The gate `candlefire_conformance` requires the candidate to answer every check.",
        "",
        *table(
            (
                "store",
                "queries",
                "as candle-fire",
                "tie swaps",
                "candle-fire's misses",
                "store's index misses",
                "differing",
                "result",
            ),
            rows,
        ),  # fmt: skip
    ]
    if failures:
        lines += ["", *table(("store", "query", "check", "difference"), failures[:20])]
    return lines


def _ratio(value) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def _ms(column: dict, key: str) -> str:
    stats = column.get(key) or {}
    return f"{stats['p50']:.1f} / {stats['p95']:.1f}" if stats else "-"


def _kinds(column: dict) -> str:
    kinds = column.get("divergences_by_kind") or {}
    listed = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"{column.get('divergences', 0)}" + (f" ({listed})" if listed else "")


def _ledger(report: ParityReport, store: str) -> str:
    diff = report.store_diffs.get(store)
    if diff is None:
        return "-"
    off = [f"{diff.get(k, 0)} {k}" for k in ("missing", "orphaned", "stale") if diff.get(k)]
    return ", ".join(off) or "exact"


COLUMN_ROWS: tuple[tuple[str, Callable], ...] = (
    ("role", lambda r, s, c: r.role(s)),
    ("chunks", lambda r, s, c: r.chunk_counts.get(s, "-")),
    ("vs the ledger", lambda r, s, c: _ledger(r, s)),
    ("top-15 overlap, mean", lambda r, s, c: _ratio(c.get("mean_overlap"))),
    ("top-15 overlap, min", lambda r, s, c: _ratio(c.get("min_overlap"))),
    ("grounding agreement", lambda r, s, c: _ratio(c.get("grounding_agreement"))),
    ("keyword agreement", lambda r, s, c: _ratio(c.get("keyword_agreement"))),
    ("ANN recall@15", lambda r, s, c: _ratio(c.get("ann_recall"))),
    ("retrieve p50 / p95 ms", lambda r, s, c: _ms(c, "latency_ms")),
    ("store-side p50 / p95 ms", lambda r, s, c: _ms(c, "store_latency_ms")),
    ("divergences from the oracle", lambda r, s, c: _kinds(c)),
)


def _column(report: ParityReport, store: str, label: str, value: Callable) -> str:
    """A cell of the store's column: a retired store's says so (it was not read)."""
    if store in report.retired:
        since = report.retired[store]["since"][:10]
        return f"retired since {since}" if label == "role" else "retired"
    return value(report, store, report.store_column(store))


def _flips(report: ParityReport) -> str:
    if not report.retired:
        return f"Serving flips only between {report.reference} and {report.candidate}; "
    return (
        f"{', '.join(report.retired)} retired: the gates judge {report.candidate} against the "
        "exact oracle and candle-fire's recorded answers; "
    )


def stores_section(report: ParityReport) -> list[str]:
    stores = [*report.stores(), *report.retired]
    if not any(report.store_column(s) for s in stores):
        return ["Not recorded: this report was written before the per-store comparison.", ""]
    lines = [
        f"One column per store, each compared with the exact oracle `{report.oracle or '-'}` "
        "(the in-memory store rebuilt from the applied batches). "
        + _flips(report)
        + (
            f"{', '.join(report.evaluated_stores())} are evaluated, never served, and never "
            "block the flip."
            if report.evaluated_stores()
            else "no other store is evaluated."
        ),
        "",
        *table(
            ("metric", *stores),
            [
                (label, *(_column(report, s, label, value) for s in stores))
                for label, value in COLUMN_ROWS
            ],
        ),
        "",
    ]
    for store in report.diverging_stores():
        column = report.store_column(store)
        consequence = (
            "judged by the gates above"
            if store in report.gated_stores()
            else "evaluated only: this does not block the flip"
        )
        lines.append(
            f"- **{store} diverges from the oracle**: {_kinds(column)}; {consequence}. "
            f'Traced below under "{store} vs the oracle".'
        )
    for store, why in report.unavailable.items():
        lines.append(f"- **{store} was not evaluated**: {why}. It does not block the flip.")
    return lines + [""] if report.diverging_stores() or report.unavailable else lines


def plots_section(report: ParityReport, image_link: Callable[[str], str]) -> list[str]:
    if not report.plots:
        return []
    lines = ["## Plots", ""]
    for kind, name in report.plots.items():
        title = PLOT_TITLES.get(kind, kind)
        lines += [f"**{title}**", "", f"![{title}]({image_link(name)})", ""]
    return lines


def query_table(report: ParityReport) -> list[str]:
    header = ("query", "overlap", "jaccard", "rbo", "grounding", "keywords") + tuple(
        f"{b} ms" for b in report.backends
    )
    rows = [
        (
            row.query_id, f"{row.overlap:.3f}", f"{row.jaccard:.3f}", f"{row.rbo:.3f}",
            "=" if row.grounding_equal else "DIFF", "=" if row.keyword_equal else "DIFF",
            *(f"{row.latency_ms[b]:.1f}" if b in row.latency_ms else "-" for b in report.backends),
        )
        for row in report.queries
    ]  # fmt: skip
    return table(header, rows)


def divergence_table(divergences: list[Divergence]) -> list[str]:
    if not divergences:
        return ["None: every compared result agrees."]
    rows = [
        (d.query_id or "-", d.kind, d.field, d.pmid or d.term or "-", d.chunk_id or "-",
         d.present_in or "-", d.detail)
        for d in divergences
    ]  # fmt: skip
    return table(("query", "kind", "field", "pmid/term", "chunk", "present in", "detail"), rows)


def store_divergence_sections(report: ParityReport) -> list[str]:
    lines = []
    for store, found in report.store_divergences.items():
        lines += [f"## {store} vs the oracle ({len(found)})", "", *divergence_table(found), ""]
    return lines
