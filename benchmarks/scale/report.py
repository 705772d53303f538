"""The cost curve's markdown and plots, from the per-size results the scale benchmark saved."""

from __future__ import annotations

import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.common.figures import MB

LAYOUT_ORDER = ("vector", "halfvec", "binary")
#: The stages timed per request (the rest of the store time is RRF, rerank and boost).
STAGES = ("semantic", "entities", "keyword", "grounding")
#: Goals of the term cache (issue #33) and of the build (issue #25).
WARM_P50_GOAL_MS, WARM_P95_GOAL_MS = 60.0, 100.0
CHROMA_RATIO_GOAL = 50.0
WARM_GROWTH_GOAL, COLD_GROWTH_GOAL = 1.5, 4.0
FANOUT_GOAL = 3.0
RECALL_GOAL = 0.99
BUILD_EXPONENT_GOAL = 1.0


def efforts_text(results: list[dict]) -> str:
    """The hnsw.ef_search pair each size ran with (sizes may come from runs of other defaults)."""
    pairs: dict[str, list[int]] = {}
    for r in results:
        ann = r.get("ann")  # results saved before the efforts were recorded
        pair = f"{ann['ef_search']} / {ann['ef_search_entities']}" if ann else "not recorded"
        pairs.setdefault(pair, []).append(r["size"])
    return "; ".join(
        f"ef_search semantic / entities {pair} at {', '.join(f'{s:,}' for s in sizes)} chunks"
        for pair, sizes in pairs.items()
    )


def build_seconds(result: dict, layout: str) -> float:
    """Load + every index of a first build with this layout's ANN index."""
    base = sum(result["build"]["seconds"].values())
    return base + result["layouts"][layout]["build"]["seconds"]["HNSW"]


def exponent(sizes: list[int], values: list[float]) -> float:
    """b of value ~ size^b between the smallest and the largest size."""
    if len(sizes) < 2 or min(values) <= 0:
        return math.nan
    return math.log(values[-1] / values[0]) / math.log(sizes[-1] / sizes[0])


def build_table(results: list[dict]) -> list[str]:
    lines = [
        "| chunks | layout | COPY s | primary key + btree s | trigram GIN s | HNSW s |"
        " phrase GIN s | build s | table MB | GIN MB | HNSW MB | phrase GIN MB |"
        " server peak MB (COPY / indexes / HNSW) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        b = r["build"]
        keys = b["seconds"]
        for layout in (name for name in LAYOUT_ORDER if name in r["layouts"]):
            hn = r["layouts"][layout]["build"]
            peaks = [b["peak_memory"]["COPY"], b["peak_memory"]["indexes"],
                     hn["peak_memory"]["HNSW"]]  # fmt: skip
            lines.append(
                f"| {r['size']:,} | {layout} | {keys['COPY']:.1f} |"
                f" {keys['primary key'] + keys['btree']:.1f} | {keys['trigram GIN']:.1f} |"
                f" {hn['seconds']['HNSW']:.1f} | {_cell(keys.get('phrase GIN'))} |"
                f" {build_seconds(r, layout):.1f} |"
                f" {b['bytes']['table'] / MB:,.0f} | {b['bytes']['trigram GIN'] / MB:,.0f} |"
                f" {hn['bytes']['HNSW'] / MB:,.0f} | {_cell(b['bytes'].get('phrase GIN'), MB, 0)} |"
                f" {' / '.join(f'{p / MB:,.0f}' for p in peaks)} |"
            )
    return lines


def _cell(value, unit: float = 1.0, digits: int = 1) -> str:
    """A figure, or "-" where a run before the phrase index did not measure it."""
    return "-" if value is None else f"{value / unit:,.{digits}f}"


def _rows(r: dict) -> list[tuple[str, dict]]:
    """(label, figures) of every measured workload of a size: each layout warm, vector cold,
    Chroma."""
    rows = [(f"{layout} (assistant, warm)", r["layouts"][layout]["query"])
            for layout in LAYOUT_ORDER if layout in r["layouts"]]  # fmt: skip
    if "cold" in r["layouts"].get("vector", {}):
        rows.append(("vector (cold)", r["layouts"]["vector"]["cold"]))
    if r.get("chroma", {}).get("query"):
        rows.append(("chroma (assistant)", r["chroma"]["query"]))
    return rows


def query_table(results: list[dict]) -> list[str]:
    lines = [
        "| chunks | store (workload) | requests | full p50 / p95 ms | store p50 / p95 ms |"
        " term cache hits | final recall@15 | semantic | entities | keyword |",
        "|---:|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for name, q in _rows(r):
            rec = q["recall"]
            hits = q.get("term_cache_hit_rate")
            lines.append(
                f"| {r['size']:,} | {name} | {q['requests']} |"
                f" {q['p50'] * 1e3:.1f} / {q['p95'] * 1e3:.1f} |"
                f" {q['store_p50'] * 1e3:.1f} / {q['store_p95'] * 1e3:.1f} |"
                f" {'-' if hits is None else f'{hits:.0%}'} | {rec['final']:.4f} |"
                f" {rec['semantic']:.4f} | {rec['entities']:.4f} | {rec['keyword']:.4f} |"
            )
    return lines


def _rest_p50(query: dict) -> float:
    """Store p50 minus the timed stages' p50: RRF, rerank and boost."""
    return query["store_p50"] - sum(query["stage_p50"].get(s, 0.0) for s in STAGES)


def stage_table(results: list[dict]) -> list[str]:
    """Where a request's time goes at each size, both workloads (vector layout, p50 ms)."""
    lines = [
        "",
        "Time by stage (vector layout, p50 ms; `rest` = the store p50 minus the four stages'"
        " p50: RRF, rerank and boost):",
        "",
        "| chunks | workload | embed | semantic | entities | keyword | grounding | rest | store |"
        " full |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        vector = r["layouts"]["vector"]
        for name, q in (("cold", vector.get("cold")), ("assistant, warm", vector["query"])):
            if q is None:
                continue
            cells = [q["stage_p50"].get(s, 0.0) for s in ("embed", *STAGES)]
            cells += [_rest_p50(q), q["store_p50"], q["p50"]]
            lines.append(f"| {r['size']:,} | {name} | " + " | ".join(
                f"{v * 1e3:.1f}" for v in cells) + " |")  # fmt: skip
    return lines


def bounds(results: list[dict]) -> list[str]:
    """How each stage's p50 grows from the smallest to the largest size, in both workloads."""
    if len(results) < 2 or "cold" not in results[0]["layouts"]["vector"]:
        return []
    sizes = [results[0]["size"], results[-1]["size"]]
    lines = ["", f"Growth of each stage's p50 from {sizes[0]:,} to {sizes[1]:,} chunks"
             " (exponent b of time ~ size^b):", ""]  # fmt: skip
    for name, key in (("cold", "cold"), ("assistant, warm", "query")):
        queries = [r["layouts"]["vector"][key] for r in (results[0], results[-1])]
        growth = {s: exponent(sizes, [q["stage_p50"][s] for q in queries]) for s in STAGES}
        shown = ", ".join(f"{stage} {b:.2f}" for stage, b in growth.items())
        lines.append(f"- {name}: {shown}.")
    return lines + ["", _recall_bound(results)]


def _recall_bound(results: list[dict]) -> str:
    """Final recall against the ANN stages' list recall, and the smallest measured ef that
    reaches the goal at the largest size."""
    largest = results[-1]
    lists = largest["layouts"]["vector"]["query"]["recall"]
    text = (
        f"Final recall follows the ANN stages' list recall, which falls with the corpus at a"
        f" fixed ef_search (vector at {largest['size']:,}: semantic {lists['semantic']:.4f},"
        f" entities {lists['entities']:.4f}); the effort table measures what a larger ef buys."
    )
    shipped = {**largest["ann"], "query": largest["layouts"]["vector"]["query"]}
    enough = [e for e in [*largest.get("efforts", []), shipped]
              if e["query"]["recall"]["final"] >= RECALL_GOAL]  # fmt: skip
    if not enough:
        return text + f" No measured ef reached {RECALL_GOAL} at {largest['size']:,}."
    e = min(enough, key=lambda e: (e["ef_search"], e["ef_search_entities"]))
    q = e["query"]
    return text + (
        f" At {largest['size']:,} chunks ef {e['ef_search']} / {e['ef_search_entities']} reaches"
        f" **{q['recall']['final']:.4f}** (entity fan-out p50 / p95"
        f" {q['stage_p50']['entities'] * 1e3:.0f} / {q['stage_p95']['entities'] * 1e3:.0f} ms):"
        " the recall goal is a matter of effort at this size, paid in the entity stage."
    )


def effort_table(results: list[dict]) -> list[str]:
    rows = [(r["size"], e) for r in results for e in r.get("efforts", [])]
    if not rows:
        return []
    lines = [
        "",
        "ANN effort at each size (vector layout; hnsw.ef_search semantic / entities):",
        "",
        "| chunks | ef semantic / entities | final recall@15 | semantic | entities |"
        " store p50 / p95 ms | entities p50 / p95 ms |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for size, e in rows:
        q = e["query"]
        lines.append(
            f"| {size:,} | {e['ef_search']} / {e['ef_search_entities']} |"
            f" {q['recall']['final']:.4f} |"
            f" {q['recall']['semantic']:.4f} | {q['recall']['entities']:.4f} |"
            f" {q['store_p50'] * 1e3:.1f} / {q['store_p95'] * 1e3:.1f} |"
            f" {q['stage_p50']['entities'] * 1e3:.1f} / {q['stage_p95']['entities'] * 1e3:.1f} |"
        )
    return lines


def chroma_lines(results: list[dict]) -> list[str]:
    lines = []
    for r in results:
        c = r.get("chroma")
        if not c:
            continue
        load = c["load"]
        took = (
            "reused (loaded by an earlier run)"
            if load["seconds"] is None
            else (f"{load['seconds']:.0f} s ({load['rows'] / load['seconds']:,.0f} rows/s)")
        )
        state = (
            ""
            if load["complete"]
            else (
                f" -- **did not finish within the budget: {load['rows']:,} of {r['size']:,} rows**"
            )
        )
        folder = load["bytes"] / MB
        lines.append(f"- {r['size']:,} chunks: load {took}{state}; folder {folder:,.0f} MB.")
    title = "Chroma (PersistentClient, the product's ChromaBackend.replace_papers):"
    return ["", title, "", *lines]


def goals(results: list[dict]) -> list[str]:
    sizes = [r["size"] for r in results]
    first, last = results[0], results[-1]
    warm = [r["layouts"]["vector"]["query"] for r in results]
    lines = ["", "Goals (pgvector, vector layout unless named):", ""]
    w = warm[0]
    lines.append(
        f"- {sizes[0]:,} chunks, assistant warm: full p50 **{w['p50'] * 1e3:.1f} ms** (goal <="
        f" {WARM_P50_GOAL_MS:.0f}, {_verdict(w['p50'] * 1e3 <= WARM_P50_GOAL_MS)}), p95"
        f" **{w['p95'] * 1e3:.1f} ms** (goal <= {WARM_P95_GOAL_MS:.0f},"
        f" {_verdict(w['p95'] * 1e3 <= WARM_P95_GOAL_MS)})."
    )
    chroma = first.get("chroma", {}).get("query")
    if chroma:
        ratio = chroma["p50"] / w["p50"]
        lines.append(
            f"- Chroma on the same requests at {sizes[0]:,}: p50 {chroma['p50']:.2f} s ="
            f" **{ratio:,.0f}x** pgvector's (goal >= {CHROMA_RATIO_GOAL:.0f}x,"
            f" {_verdict(ratio >= CHROMA_RATIO_GOAL)})."
        )
    fanout = w["stage_p50"]["entities"] / w["stage_p50"]["semantic"]
    lines.append(
        f"- Entity fan-out (12 names) at {sizes[0]:,}, warm: **{fanout:.2f}x** the semantic"
        f" query's p50 (goal <= {FANOUT_GOAL:.0f}x, {_verdict(fanout <= FANOUT_GOAL)})."
    )
    if len(results) > 1:
        growth = warm[-1]["p95"] / warm[0]["p95"]
        lines.append(
            f"- Warm p95 at {sizes[-1]:,} / at {sizes[0]:,} = **{growth:.2f}x** (goal <="
            f" {WARM_GROWTH_GOAL}x, {_verdict(growth <= WARM_GROWTH_GOAL)})."
        )
        colds = [r["layouts"]["vector"].get("cold") for r in (first, last)]
        if all(colds):
            growth = colds[1]["p95"] / colds[0]["p95"]
            lines.append(
                f"- Cold p95 at {sizes[-1]:,} / at {sizes[0]:,} = **{growth:.2f}x** (goal <="
                f" {COLD_GROWTH_GOAL:.0f}x, {_verdict(growth <= COLD_GROWTH_GOAL)})."
            )
    for layout in LAYOUT_ORDER:
        recall = [r["layouts"][layout]["query"]["recall"]["final"] for r in results
                  if layout in r["layouts"]]  # fmt: skip
        colds = [r["layouts"][layout]["cold"]["recall"]["final"] for r in results
                 if "cold" in r["layouts"].get(layout, {})]  # fmt: skip
        if not recall:
            continue
        build = exponent(sizes, [build_seconds(r, layout) for r in results])
        cold_text = f", cold {min(colds):.4f}" if colds else ""
        lines.append(
            f"- {layout}: final recall@15 lowest **{min(recall):.4f}** warm{cold_text} (goal >="
            f" {RECALL_GOAL}, {_verdict(min(recall + colds) >= RECALL_GOAL)}); build time ~"
            f" size^{build:.2f} (goal <= 1, {_verdict(build <= BUILD_EXPONENT_GOAL + 0.05)})."
        )
    cache = last.get("term_cache")
    if cache:
        per = cache["bytes"] / cache["entries"] if cache["entries"] else 0.0
        lines.append(
            f"- Term cache at {sizes[-1]:,} chunks after both workloads: {cache['entries']:,}"
            f" entries ({cache['keyword']:,} keyword, {cache['entity']:,} entity,"
            f" {cache['approximate']:,} made by a walk), {cache['bytes'] / MB:.1f} MB with its"
            f" indexes = {per / 1024:.1f} KB per entry."
        )
    return lines


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def plot(results: list[dict], path) -> None:
    """One PNG, a panel per metric against corpus size (log-log; recall on a linear axis)."""
    series = {
        "build s (load + indexes)": lambda r, lay: build_seconds(r, lay),
        "table + indexes MB": lambda r, lay: (sum(r["build"]["bytes"].values())
                                            + r["layouts"][lay]["build"]["bytes"]["HNSW"]) / MB,
        "server peak MB": lambda r, lay: max(*r["build"]["peak_memory"].values(),
                                           r["layouts"][lay]["build"]["peak_memory"]["HNSW"]) / MB,
        "full retrieve p95 ms (warm)": lambda r, lay: r["layouts"][lay]["query"]["p95"] * 1e3,
        "final recall@15": lambda r, lay: r["layouts"][lay]["query"]["recall"]["final"],
    }  # fmt: skip
    figure = Figure(figsize=(3.0 * len(series), 2.8), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(series))
    for ax, (title, value) in zip(axes, series.items(), strict=True):
        for layout in LAYOUT_ORDER:
            label = f"{layout} warm" if "p95" in title or "recall" in title else layout
            have = [r for r in results if layout in r["layouts"]]
            ax.plot([r["size"] for r in have], [value(r, layout) for r in have], marker="o",
                    label=label)  # fmt: skip
        chroma = [(r["size"], r["chroma"]["query"]) for r in results
                  if r.get("chroma", {}).get("query")]  # fmt: skip
        colds = [(r["size"], r["layouts"]["vector"]["cold"]) for r in results
                 if "cold" in r["layouts"].get("vector", {})]  # fmt: skip
        if colds and ("p95" in title or "recall" in title):
            key = (lambda q: q["p95"] * 1e3) if "p95" in title else (lambda q: q["recall"]["final"])
            ax.plot([s for s, _ in colds], [key(q) for _, q in colds], marker="^",
                    linestyle="--", label="vector cold")  # fmt: skip
        if chroma and ("p95" in title or "recall" in title):
            key = (lambda q: q["p95"] * 1e3) if "p95" in title else (lambda q: q["recall"]["final"])
            ax.plot([s for s, _ in chroma], [key(q) for _, q in chroma], marker="s", label="chroma")
        ax.set_xscale("log")
        if "recall" not in title:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("chunks", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[3].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})
