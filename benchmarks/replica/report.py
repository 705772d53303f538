"""The replica benchmark's figures and its docs/BENCHMARKS.md section."""

from __future__ import annotations

import statistics
from collections import Counter

from benchmarks.replica.probe import ERROR, NEW, PREVIOUS, TORN

KINDS = (PREVIOUS, NEW, TORN, ERROR)


def figures(phase) -> dict:
    """One drop's lag (from its start until the replica replayed it) and the reader's answers."""
    start = phase.committed_at - phase.apply_seconds
    lagging = [s for s in phase.samples if start <= s[0] <= phase.replayed_at] or [(0, 0, 0.0)]
    after = phase.resumed_at if phase.resumed_at is not None else phase.committed_at
    # surely lagging: paused, until the resume; streaming, until the poll saw the replay
    lag_end = phase.resumed_at if phase.resumed_at is not None else phase.replayed_at
    window = [a for a in phase.answers if phase.committed_at <= a.at <= lag_end]
    ms = sorted(a.ms for a in phase.answers) or [0.0]
    return {
        "rows": phase.rows,
        "apply_s": phase.apply_seconds,
        "lag_bytes_max": max(s[1] for s in lagging),
        "lag_bytes_median": statistics.median(s[1] for s in lagging),
        "lag_s_max": max(s[2] for s in lagging),
        "lag_s_median": statistics.median(s[2] for s in lagging),
        "replayed_after_commit_s": phase.replayed_at - phase.committed_at,
        "caught_up_s": phase.replayed_at - after,
        "answers": Counter(a.kind for a in phase.answers),
        "lagging_answers": Counter(a.kind for a in window),
        "errors": sorted({a.detail for a in phase.answers if a.kind == ERROR}),
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        "timeline": timeline(phase.samples),
    }


def timeline(samples, points_wanted: int = 20) -> list[tuple[int, float]]:
    """(second, MB of lag) at about `points_wanted` whole seconds: the sample nearest each."""
    if not samples:
        return []
    points, end = [], int(samples[-1][0])
    for second in range(0, end + 1, max(1, round(end / points_wanted))):
        nearest = min(samples, key=lambda s: abs(s[0] - second))
        points.append((second, nearest[1] / 1e6))
    return points


def _counts(counter: Counter) -> str:
    return " / ".join(str(counter.get(kind, 0)) for kind in KINDS)


def section(result: dict, args, load_note: str, spent: float) -> str:
    backup = result["backup"]
    lines = [
        "## Read replica: lag during a drop, the reader meanwhile (`python -m benchmarks replica`)",
        "",
        f"{result['rows']:,} chunks ({result['papers']:,} papers) in pgvector on the run's own "
        "embedded primary; a hot standby made from it with `candlefire replica create`'s path "
        f"(pg_basebackup -R behind a slot) in {backup['seconds']:.1f} s, "
        f"{backup['bytes'] / 1e6:,.0f} MB. The app's collection (`open_collection`) reads the "
        "replica as the read-only role (CANDLEFIRE_PG_READ_DSN) while each drop replaces "
        f"{args.share:.0%} of the papers (replace_papers: one transaction); the second drop's "
        f"replay is paused for {args.hold:g} s, then resumed. Lag: the primary's "
        "pg_stat_replication every 0.25 s (bytes not replayed; replay_lag) from the drop's "
        "start until the replica replayed its commit. Answers: previous / new / torn / error, "
        f"classed by a get() of {args.sample} of the drop's papers (one statement); "
        "while lagging: those that ended after the commit and before the resume (paused) or "
        "before a 20-ms poll saw the replay (streaming).",
        "",
        "| drop | rows | apply s | lag MB max / median | replay_lag s max / median | "
        "replayed after commit s | caught up s | answers (prev / new / torn / err) | "
        "while lagging | request p50 / p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for phase in result["phases"]:
        f = figures(phase)
        lines.append(
            f"| {phase.name} | {f['rows']:,} | {f['apply_s']:.1f} | "
            f"{f['lag_bytes_max'] / 1e6:.1f} / {f['lag_bytes_median'] / 1e6:.1f} | "
            f"{f['lag_s_max']:.2f} / {f['lag_s_median']:.2f} | "
            f"{f['replayed_after_commit_s']:.2f} | {f['caught_up_s']:.2f} | "
            f"{_counts(f['answers'])} | {_counts(f['lagging_answers'])} | "
            f"{f['p50_ms']:.0f} / {f['p95_ms']:.0f} |"
        )
    for phase in result["phases"]:
        f = figures(phase)
        shown = ", ".join(f"{s}s {mb:.0f}" for s, mb in f["timeline"])
        lines.append(f"\nLag over time, {phase.name} (second: MB): {shown}.")
        if f["errors"]:
            lines.append(f"Errors: {'; '.join(f['errors'])}.")
    lines += ["", f"Machine: {load_note}. Whole run {spent / 60:.1f} min."]
    return "\n".join(lines)
