"""The app benchmark's docs/BENCHMARKS.md section: latency per arm, the ratio against the goal,
what a request costs in calls and embeddings, and whether the collection arms answered alike."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.app.agreement import summary
from candlefire_pipeline.parity import metrics

#: Issue 43: the search path through the collection vs Chroma's same calls (at least), vs
#: ServingReader (at most), the 1M / 62k p95 growth warm and cold (at most), app threads.
GOALS = {"vs_chroma": 50.0, "vs_reader": 2.0, "warm_growth": 1.5, "cold_growth": 4.0,
         "threads": 10.0}  # fmt: skip


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


def answered_text(answered: dict[str, int]) -> str:
    """The shares of the collection's calls answered from its process copy and from kept
    entries of the term cache."""
    total = sum(answered.values())
    if not total:
        return "-"
    kept = sum(n for how, n in answered.items() if how.startswith("kept"))
    return f"{answered.get('local', 0) / total:.0%} / {kept / total:.0%} of {total:,}"


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def arms_table(arms: dict, n: int) -> list[str]:
    lines = [
        "| arm | p50 ms | p95 ms | p50 / p95 ms without embedding | calls per request |"
        " embedder calls per request | texts embedded per request |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for arm in arms.values():
        (p50, p95), (b50, b95) = p50_p95(arm.seconds), p50_p95(without_embedding(arm))
        lines.append(
            f"| {arm.name} | {p50:,.1f} | {p95:,.1f} | {b50:,.1f} / {b95:,.1f} |"
            f" {calls_text(arm, n)} | {arm.embedder_calls / n:.1f} | {arm.texts / n:.1f} |"
        )
    return lines


def sizes_table(results: list[dict]) -> list[str]:
    lines = [
        "| chunks | warm p50 ms | warm p95 ms | cold p50 ms | cold p95 ms | calls from the process"
        " copy / kept entries (warm) | warm answers vs the exact referee |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        (w50, w95), (c50, c95) = p50_p95(r["warm"].seconds), p50_p95(r["cold"].seconds)
        lines.append(
            f"| {r['size']:,} | {w50:,.1f} | {w95:,.1f} | {c50:,.1f} | {c95:,.1f} |"
            f" {answered_text(r['warm'].answered)} |"
            f" {summary(r['referee'], ('the referee', 'the collection'))} |"
        )
    return lines


def markdown(results: list[dict], facts: dict, note: str) -> str:
    first, last = results[0], results[-1]
    n = first["requests"]
    pg, chroma, reader = first["arms"].values()
    vs_chroma = [c / p for c, p in zip(p50_p95(chroma.seconds), p50_p95(pg.seconds), strict=True)]
    vs_reader = p50_p95(pg.seconds)[1] / p50_p95(reader.seconds)[1]
    warm = p50_p95(last["warm"].seconds)[1] / p50_p95(first["warm"].seconds)[1]
    cold = p50_p95(last["cold"].seconds)[1] / p50_p95(first["cold"].seconds)[1]
    many = first["threads"][-1]
    lines = [
        "## The app's search path: open_collection() on pgvector vs Chroma, to 1M chunks"
        " (issues 34, 43)",
        "",
        "candle-fire's search path written against the Collection API (`benchmarks/app/"
        "search_path.py`: `search`, `search_by_entities`, `search_by_keyword`, grounding in the"
        " corpus and in abstracts, `paper_texts_for_pmids`, `get_paper`: ~80 calls a request) on"
        f" the scale corpus (the same {n} request texts at every size: a SciFact claim, 12 entity"
        " names and 3 codes each). Warm: after an untimed pass over the name pool and one over"
        " the requests (an app that has run a while), the timed requests asking question texts"
        " never seen (the claim with a suffix naming the pass; names and codes seen before), since"
        " the collection's process copy answers a request repeated word for word whole, with no"
        " round trip; cold: names and codes never seen, on an"
        " emptied term cache and a new collection (3 untimed cold requests first). pgvector walks"
        f" its HNSW index at ef_search {facts['pg_ef_search']} for the unfiltered queries the"
        " term cache does not keep (the semantic pool of 60). At the first size, the same calls on"
        " the real Chroma collection (as candle-fire ships it: ef_search 100, its embedding"
        " function embedding each `query`'s texts) and `ServingReader.retrieve` (warm) on the"
        " same requests, the arms interleaved request by request in a rotating order; the real"
        " packaged query model on every arm.",
        "",
        f"**{first['size']:,} chunks, warm:**",
        "",
        *arms_table(first["arms"], n),
        "",
        f"Chroma / open_collection(): **{vs_chroma[0]:.1f}x** at p50, **{vs_chroma[1]:.1f}x** at"
        f" p95 (goal >= {GOALS['vs_chroma']:g}x: {_verdict(min(vs_chroma) >= GOALS['vs_chroma'])})."
        f" open_collection() / ServingReader: **{vs_reader:.2f}x** at p95 (goal <="
        f" {GOALS['vs_reader']:g}x: {_verdict(vs_reader <= GOALS['vs_reader'])}).",
        "",
        "**Answers.** " + summary(first["verdicts"], ("Chroma", "open_collection() on pgvector"))
        + " The referee is the same table ranked exactly (every row); a list counts as the exact"
        " one when it equals it but for tied rows.",
        "",
        "**The collection at each size:**",
        "",
        *sizes_table(results),
        "",
        f"{last['size']:,} / {first['size']:,} chunks: warm p95 **{warm:.2f}x** (goal <="
        f" {GOALS['warm_growth']:g}x: {_verdict(warm <= GOALS['warm_growth'])}), cold p95"
        f" **{cold:.2f}x** (goal <= {GOALS['cold_growth']:g}x:"
        f" {_verdict(cold <= GOALS['cold_growth'])}).",
        "",
        f"**App threads** sharing one warm collection at {first['size']:,} chunks on this"
        " machine's 2 cores: " + ", ".join(
            f"{t['threads']} thread{'s' if t['threads'] > 1 else ''} {t['per_second']:.1f}"
            f" requests/s" for t in first["threads"])
        + f" (goal >= {GOALS['threads']:g} with {many['threads']}:"
        f" {_verdict(many['per_second'] >= GOALS['threads'])}).",
        "",
        note,
        "",
        f"app-path 62k: vs Chroma {vs_chroma[0]:.1f}x p50, {vs_chroma[1]:.1f}x p95;"
        f" vs ServingReader {vs_reader:.2f}x p95",
        f"app-path 1M: warm p95 {warm:.2f}x of 62k, cold p95 {cold:.2f}x of 62k",
        f"app-path threads: {many['per_second']:.1f} requests/s with {many['threads']} threads",
    ]  # fmt: skip
    return "\n".join(lines)
