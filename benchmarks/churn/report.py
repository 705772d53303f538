"""The churn soak's section of docs/BENCHMARKS.md: checkpoints, the fresh reference, goals."""

from __future__ import annotations

from benchmarks.churn.loop import STAGES, Checkpoint
from benchmarks.common.figures import MB

RECALL_GOAL, BYTES_GOAL, P95_GOAL = 0.99, 1.5, 1.3


def _row(label: str, p: Checkpoint) -> str:
    stages = " / ".join(f"{p.stage_p95_ms.get(s, 0.0):.0f}" for s in STAGES)
    return (
        f"| {label} | {p.recall:.4f} | {p.p50_ms:.1f} / {p.p95_ms:.1f} | {stages} |"
        f" {p.hnsw_bytes / MB:.1f} | {p.gin_bytes / MB:.1f} | {p.heap_bytes / MB:.1f} |"
        f" {p.live_tuples:,} | {p.dead_tuples:,} | {p.autovacuums} / {p.vacuums} |"
        f" {p.drop_seconds:.1f} / {p.waited_seconds:.0f} | {p.cache_entries:,} /"
        f" {p.cache_differences} / {p.cache_walked_recall:.3f} | {p.upkeep_share:.1%} |"
    )


def best(points: list[Checkpoint]) -> Checkpoint:
    """The round with the lower p95 (the other rounds shared the machine with more noise)."""
    return min(points, key=lambda p: p.p95_ms)


def _verdict(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


def goals(points: list[Checkpoint], churned: Checkpoint, fresh: Checkpoint, sizes=()) -> list[str]:
    worst_recall = min(points + [churned], key=lambda p: p.recall)
    fresh_bytes = fresh.hnsw_bytes + fresh.gin_bytes
    measured = [(p.drop, p.hnsw_bytes, p.gin_bytes) for p in points + [churned]] + list(sizes)
    drop, hnsw, gin = max(measured, key=lambda m: m[1] + m[2])
    worst_bytes = Checkpoint(drop, 0, 0, 0, hnsw, gin, 0, 0, 0, 0, 0, 0)
    bytes_ratio = (hnsw + gin) / fresh_bytes
    p95_ratio = churned.p95_ms / fresh.p95_ms
    trend = max(p.p95_ms for p in points[1:]) / points[0].p95_ms if len(points) > 1 else 1.0
    return [
        f"- recall@15 never below {RECALL_GOAL}: lowest **{worst_recall.recall:.4f}** (drop"
        f" {worst_recall.drop}): {_verdict(worst_recall.recall >= RECALL_GOAL)}.",
        f"- index bytes (HNSW + GIN, after every drop) within {BYTES_GOAL}x of a fresh build:"
        " largest"
        f" **{bytes_ratio:.2f}x** (drop {worst_bytes.drop}; HNSW"
        f" {worst_bytes.hnsw_bytes / fresh.hnsw_bytes:.2f}x, GIN"
        f" {worst_bytes.gin_bytes / fresh.gin_bytes:.2f}x): {_verdict(bytes_ratio <= BYTES_GOAL)}.",
        f"- retrieve() p95 within {P95_GOAL}x: churned {churned.p95_ms:.1f} ms vs fresh"
        f" {fresh.p95_ms:.1f} ms side by side = **{p95_ratio:.2f}x**"
        f" ({_verdict(p95_ratio <= P95_GOAL)}); the checkpoints' highest p95 vs drop 0:"
        f" {trend:.2f}x.",
        f"- the term cache exact at every checkpoint: entries differing from a fresh computation"
        f" **{sum(p.cache_differences for p in points + [churned])}**"
        f" ({_verdict(all(p.cache_differences == 0 for p in points + [churned]))}); its upkeep"
        f" took at most **{max(p.upkeep_share for p in points):.1%}** of a drop's"
        " replace_papers time.",
    ]


def estimate_line(estimate, fresh: Checkpoint) -> str:
    """How close `candlefire maintain`'s sampled fresh-size estimate came to the real build."""
    parts = []
    for method, real in (("hnsw", fresh.hnsw_bytes), ("gin", fresh.gin_bytes)):
        index = estimate.index(method) if estimate else None
        if index is not None and index.fresh_bytes:
            parts.append(
                f"{method.upper()} {index.fresh_bytes / MB:.1f} MB estimated vs {real / MB:.1f} MB"
                f" built ({index.fresh_bytes / real:.2f}x); bloat read {index.bloat:.2f}x"
            )
    return (
        "`candlefire maintain`'s fresh-size estimate on the churned table at the end (the same"
        " index definition built on 5,000 sampled rows, scaled to the live rows): "
        + ("; ".join(parts) or "not measured")
        + "."
    )


PACING = {
    True: "Paced: after each drop the soak waits while autovacuum is due on the table (its"
    " default trigger: 50 + 0.2 x rows dead), as the hours between daily drops would let it;"
    " autovacuum_naptime is 5 s and autovacuum_vacuum_cost_delay 0 for the run, so the wait is"
    " neither a minute of idling nor the throttle's sleeps (the same vacuum work, finished"
    " sooner).",
    False: "Back to back: each drop follows the last at once (autovacuum gets no time between"
    " them: the worst case, not the product's daily pace).",
}


def _actions_text(actions: list[dict]) -> str:
    return "; ".join(
        f"drop {a['drop']}: {a['kind']} {a['target']} ({a['reason']}; {a['seconds']:.0f} s)"
        for a in actions
    )


def maintenance_lines(soak_log, args) -> list[str]:
    actions = soak_log.actions if soak_log else []
    upkept = [a for a in actions if a.get("upkeep")]
    weekly = [a for a in actions if not a.get("upkeep")]
    rebuilt = f"{len(upkept)} rebuild(s): {_actions_text(upkept)}." if upkept else "no rebuild."
    lines = [
        "",
        "After each drop the store asset's own check (`gin_upkeep`: the trigram GIN's bloat"
        " estimate, `REINDEX INDEX CONCURRENTLY` past 1.5x; its time is in the seconds per"
        f" drop): {rebuilt}"
        if getattr(args, "upkeep", True)
        else "The store asset's GIN check after each write was off (`--no-upkeep`).",
    ]
    every = getattr(args, "maintain_every", 0)
    if not every:
        return [*lines, "", "No weekly maintenance ran (`--maintain-every 0`)."]
    return [
        *lines,
        "",
        f"`candlefire maintain --apply` ran on the table every {every} drops (the weekly"
        f" store_maintenance_schedule with daily drops): {len(weekly)} action(s)"
        + (f": {_actions_text(weekly)}." if weekly else "."),
    ]


def reindex_lines(reindex: dict | None) -> list[str]:
    if not reindex:
        return []
    rebuilt = ", ".join(f"{name} {s:.1f} s" for name, s in reindex["indexes"].items())
    errors = f"**{reindex['errors']} errors**" if reindex["errors"] else "**0 errors**"
    if reindex["first_error"]:
        errors += f" (first: {reindex['first_error']})"
    return [
        "Serving during maintenance: `REINDEX INDEX CONCURRENTLY` of the churned table's HNSW"
        f" and GIN indexes on another connection ({rebuilt}) while one client ran retrieve()"
        f" in a loop: {reindex['served']} requests served, {errors}, p50 / p95"
        f" {reindex['p50_ms']:.1f} / **{reindex['p95_ms']:.1f} ms** during the rebuild vs p95"
        f" {reindex['quiet_p95_ms']:.1f} ms in a quiet pass just before (the rebuild takes one of"
        " the 2 CPUs).",
    ]


def _intro(result: dict, args) -> list[str]:
    facts = result["facts"]
    settings = ", ".join(f"{k} {v}" for k, v in facts.items() if k != "versions")
    return [
        "## Churn soak",
        "",
        f"{args.drops} update drops on the {result['rows']:,}-chunk retrieval workload"
        f" ({result['papers']:,} papers): each replaces {args.share:.0%} of the papers (new"
        " vectors and text, same pmids and shape) through `replace_papers` (DELETE + COPY, one"
        f" transaction) on the embedded {facts['versions']}, autovacuum as configured"
        f" ({settings}). Every {args.every} drops: final recall@15 of `retrieve()`"
        f" ({args.requests} requests: SciFact claims, 12 entity names, 3 terms; product"
        " settings) against the exact oracle over the same content, index and heap bytes, dead"
        " tuples, (auto)vacuums so far (auto / manual), retrieve() p50 / p95 (query embeddings"
        " memoized: store time), seconds per drop and waited for autovacuum after it; the term"
        " cache as shipped (on: the checkpoints' recurring names and codes are kept and every"
        " drop maintains them), audited at each checkpoint (every entry against a fresh"
        " computation: `not exact` must be 0; lists made by an HNSW walk are checked member by"
        " member and their recall against the exact list shown), and its upkeep's share of the"
        " drops' `replace_papers` time. " + PACING[args.pace],
        "",
        "| drop | recall@15 | p50 / p95 ms | p95 ms semantic / entities / keyword / grounding |"
        " HNSW MB | GIN MB | heap MB | live | dead | (auto)vacuums | s per drop / waited |"
        " term cache entries / not exact / walked recall | upkeep share of the drop |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[_row(str(p.drop), p) for p in result["points"]],
    ]


def partial_section(result: dict, args, load_note: str, seconds: float) -> str:
    """The section while the soak runs (written at each checkpoint): drop 0, a fresh build of
    the initial content, is the reference until the final side-by-side comparison."""
    points = result["points"]
    lines = [
        *_intro(result, args),
        "",
        f"**In progress: {points[-1].drop} of {args.drops} drops done** (this section is"
        " rewritten at each checkpoint; the final one compares with a fresh build of the final"
        " content side by side). Against drop 0 so far:",
        "",
        *goals(points, points[-1], points[0], result["log"].sizes if result.get("log") else ()),
        *maintenance_lines(result.get("log"), args),
        "",
        load_note + f" {seconds / 60:.0f} min so far.",
    ]
    return "\n".join(lines)


def section(result: dict, args, load_note: str, seconds: float) -> str:
    churned, fresh = (min(result["final"][k], key=lambda p: p.p95_ms) for k in ("churned", "fresh"))
    lines = [
        *_intro(result, args),
        _row(f"{args.drops}, churned (side by side)", churned),
        _row("fresh build of the final content", fresh),
        "",
        "Goals (reference: the final content built fresh, measured side by side with the"
        " churned table, better of 2 alternating rounds each):",
        "",
        *goals(result["points"], churned, fresh, result["log"].sizes if result.get("log") else ()),
        *maintenance_lines(result.get("log"), args),
        "",
        estimate_line(result.get("estimate"), fresh),
        "",
        *reindex_lines(result.get("reindex")),
        "",
        load_note + f" The soak took {seconds / 60:.0f} min.",
    ]
    return "\n".join(lines)
