"""The unretire benchmark's docs/BENCHMARKS.md section: unretire and its parts against Chroma's
first load of the same rows, per size, and what a rollback after retirement costs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from benchmarks.common.figures import MB

#: The calls of each timed part of unretire (one target: the default generation's).
PARTS = (("rebuild", 0, "rebuild pass"), ("rebuild", 1, "catch-up pass"),
         ("differing", 0, "check"))  # fmt: skip


def medians(runs: Sequence[dict]) -> dict:
    """Median seconds, process seconds, rows written and per-call part seconds of repeated
    runs of one operation; the highest peak RSS."""
    out = {key: statistics.median(r[key] for r in runs)
           for key in ("seconds", "process_seconds", "rows_written")}  # fmt: skip
    out["peak_rss"] = max(r["peak_rss"] for r in runs)
    for name in sorted({name for r in runs for name in r.get("parts", {})}):
        calls = max(len(r["parts"].get(name, ())) for r in runs)
        out[name] = [
            statistics.median(r["parts"][name][i] for r in runs
                              if len(r["parts"].get(name, ())) > i)
            for i in range(calls)
        ]  # fmt: skip
    return out


def _part(figures: dict, name: str, call: int) -> str:
    calls = figures.get(name, [])
    return f"{calls[call]:.1f}" if len(calls) > call else "-"


def other_seconds(figures: dict) -> float | None:
    """Seconds of the operation outside its timed parts (opening the store, the switch and its
    history); None for an operation without parts."""
    timed = [s for name in {name for name, _, _ in PARTS} for s in figures.get(name, [])]
    return figures["seconds"] - sum(timed) if timed else None


def row(size: int, operation: str, figures: dict) -> str:
    rate = figures["rows_written"] / figures["seconds"] if figures["seconds"] else 0.0
    other = other_seconds(figures)
    parts = " | ".join(_part(figures, name, call) for name, call, _ in PARTS)
    parts += " | -" if other is None else f" | {other:.1f}"
    return (
        f"| {size:,} | {operation} | {figures['rows_written']:,.0f} |"
        f" **{figures['seconds']:.1f}** | {parts} | {rate:,.0f} |"
        f" {figures['process_seconds']:.1f} | {figures['peak_rss'] / MB:,.0f} |"
    )


def cost_line(result: dict, figures: dict[str, dict]) -> str:
    """What a rollback after retirement costs at this size."""
    deleted, load = figures["unretire, folder deleted"], figures["first load"]
    text = (f"at {result['size']:,} chunks, **{deleted['process_seconds'] / 60:.1f} min** of"
            f" `candlefire unretire chroma` with the folder deleted"
            f" ({deleted['seconds'] / load['seconds']:.2f}x Chroma's first load of the same"
            " rows)")  # fmt: skip
    kept = figures.get("unretire, folder kept")
    if kept:
        text += (f", {kept['process_seconds'] / 60:.1f} min with the folder kept and"
                 f" {result['passed_over']} drops ({kept['rows_written']:,.0f} chunks) passed"
                 " over")  # fmt: skip
    return text


def markdown(results: Sequence[dict], note: str) -> str:
    figures = [{op: medians(runs) for op, runs in r["runs"].items()} for r in results]
    first = results[0]
    lines = [
        "## The way back after retirement: unretire (issue 35)",
        "",
        f"The retrieval workload (SciFact text, vectors from the packaged model's title"
        f" embeddings) written as {first['drops']} drops of ledger batch files (chunks,"
        " embeddings, papers; disjoint papers) and applied to pgvector (`apply_batch`); Chroma"
        f" retired after all but the last {first['passed_over']} drops, which passed it over."
        " Each operation is a fresh process with the settings an operator's command reads:"
        " **first load** = every drop applied to an empty Chroma (`apply_batch`, what the"
        " dual-write paid); **unretire** = `operations.retirement.commands.unretire` end to end"
        " (the rebuild from the batch files, no embedding; the catch-up pass and the check"
        " against the ledger under Chroma's write lock; the switch), with Chroma's folder"
        " deleted (`retire --delete-files`: everything rewritten) or kept as it was when Chroma"
        " retired (the passed-over drops written, every chunk read back for the check). Seconds"
        " are medians of the repeats (the operations interleaved per repeat); other = opening"
        " Chroma, the switch and its history; process = the command's wall time with"
        " interpreter start and imports (the first load ran as two processes: the drops Chroma"
        " held when it retired, then the rest); peak RSS of its process.",
        "",
        "| chunks | operation | chunks written | seconds | rebuild pass | catch-up pass | check |"
        " other | rows/s | process s | peak RSS MB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result, by_op in zip(results, figures, strict=True):
        lines += [row(result["size"], op, f) for op, f in by_op.items()]
    lines += [""]
    for result in results:
        lines.append(
            f"{result['size']:,} chunks: {result['repeats']} repeat(s); Chroma's folder"
            f" {result['folder_bytes'] / MB:,.0f} MB; pgvector's apply of the same drops"
            f" {result['pg_apply_seconds']:.1f} s (once, setup)."
        )
    costs = "; ".join(cost_line(r, f) for r, f in zip(results, figures, strict=True))
    lines += [
        "",
        f"**What a rollback after retirement costs:** {costs}; then `candlefire rollback`, which"
        " reads only the switch file. Until the unretire is done the rollback is refused (with"
        " that command), and pgvector keeps serving throughout.",
        "",
        note,
    ]
    return "\n".join(lines)
