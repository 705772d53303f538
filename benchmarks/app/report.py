"""The app benchmark's docs/BENCHMARKS.md section: latency per arm, the ratio against the goal,
what a request costs in calls and embeddings, and whether the collection arms answered alike."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.app.agreement import Verdict, summary
from candlefire_pipeline.parity import metrics

#: Issue #34: the search path through the collection on pgvector vs the same calls on Chroma.
GOAL_RATIO = 10.0


def p50_p95(seconds: Sequence[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    return metrics.p50(seconds) * 1e3, metrics.p95(seconds) * 1e3


def without_embedding(arm) -> list[float]:
    """Each request's seconds less the seconds its embedder calls took."""
    return [total - embed for total, embed in zip(arm.seconds, arm.embed_seconds, strict=True)]


def calls_text(arm, n: int) -> str:
    """ "94.4 (count 1.0, query 62.3, get 31.1)" per request."""
    counts = {name: count / n for name, count in arm.call_counts.items()}
    if list(counts) == ["retrieve"]:
        return "1 (retrieve)"
    parts = ", ".join(f"{name} {value:.1f}" for name, value in counts.items())
    return f"{sum(counts.values()):.1f} ({parts})"


def ratio_line(slow, fast, label: str, goal: float | None = None) -> str:
    """`slow` / `fast` at p50 and p95, total and without the embedder's time (against `goal`)."""
    total = [s / f for s, f in zip(p50_p95(slow.seconds), p50_p95(fast.seconds), strict=True)]
    bare = [s / f for s, f in zip(p50_p95(without_embedding(slow)),
                                  p50_p95(without_embedding(fast)), strict=True)]  # fmt: skip
    judged = "" if goal is None else (
        f" (goal >= {goal:g}x at both: {'met' if min(total) >= goal else 'NOT met'})"
    )  # fmt: skip
    return (f"{label}: **{total[0]:.1f}x** at p50, **{total[1]:.1f}x** at p95{judged}; without"
            f" the embedder's time {bare[0]:.1f}x / {bare[1]:.1f}x.")  # fmt: skip


def markdown(arms: dict, verdicts: Sequence[Verdict], facts: dict, note: str) -> str:
    n = facts["requests"]
    pg, chroma, reader = arms.values()
    lines = [
        "## The app's search path: open_collection() on pgvector vs Chroma (issue 34)",
        "",
        f"candle-fire's search path written against the Collection API (`benchmarks/app/"
        f"search_path.py`: `search`, `search_by_entities`, `search_by_keyword`, grounding in"
        f" the corpus and in abstracts, `paper_texts_for_pmids`, `get_paper`) over"
        f" {facts['size']:,} chunks (the retrieval latency workload: {n} SciFact claims, 12"
        f" entity names and 3 codes each), the same chunks and vectors in a pgvector table and"
        f" a persisted Chroma collection (ef_search {facts['chroma_ef_search']}, as candle-fire"
        f" ships it; its embedding function embeds each `query`'s texts). Through"
        f" `open_collection()` pgvector walks its HNSW index at ef_search"
        f" {facts['pg_ef_search']} (the product's setting; a table of at most"
        f" {facts['full_scan_rows']:,} rows is ranked exactly). `ServingReader.retrieve` answers"
        f" the same requests on the same table after one untimed pass over them (its query-vector"
        f" and term caches warm, as in an app that has run a while). The collection arms had"
        f" {facts['warmup']} untimed request(s) first. One process, the arms interleaved request by"
        " request in a rotating order; the real packaged query model on every arm.",
        "",
        "| arm | p50 ms | p95 ms | p50 / p95 ms without embedding | calls per request |"
        " embedder calls per request | texts embedded per request |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for arm in arms.values():
        (p50, p95), (b50, b95) = p50_p95(arm.seconds), p50_p95(without_embedding(arm))
        lines.append(
            f"| {arm.name} | {p50:,.0f} | {p95:,.0f} | {b50:,.0f} / {b95:,.0f} |"
            f" {calls_text(arm, n)} | {arm.embedder_calls / n:.1f} | {arm.texts / n:.1f} |"
        )
    lines += [
        "",
        ratio_line(chroma, pg, "Chroma / open_collection() on pgvector", GOAL_RATIO),
        ratio_line(pg, reader, "open_collection() on pgvector / ServingReader (warm)"),
        "",
        "**Answers.** " + summary(verdicts, ("Chroma", "open_collection() on pgvector")) + " The"
        " referee is the same table ranked exactly (every row); a list counts as the exact one"
        " when it equals it but for tied rows.",
        "",
        note,
    ]
    return "\n".join(lines)
