"""The app-network section of docs/BENCHMARKS.md: the arms at each RTT, threads, the staleness
window and the install, ending with the four lines issue 52 asks for."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from benchmarks.app.install import Install
from benchmarks.app.network import CHROMA, COPY_ON, NEW, READER, REPEATED, Row
from benchmarks.app.network_threads import Throughput
from benchmarks.app.report import calls_text, p50_p95
from benchmarks.app.staleness import KINDS, LOST, ON, Windows

#: Issue 52: collection p95 / reader p95 (at most), round trips per request (at most), Chroma /
#: collection at 0 ms (at least), threads' requests/s at 10 ms / at 0 ms (at least).
GOALS = {"vs_reader": 1.5, "round_trips": 4.0, "vs_chroma": 50.0, "threads": 0.8}
#: The RTTs the closing lines name, and the one the threads line compares with 0 ms.
LINE_RTTS, THREADS_RTT = (2.0, 10.0), 10.0


def _met(met: bool) -> str:
    return "met" if met else "NOT met"


def trips_text(trips: Sequence[int]) -> str:
    return f"{statistics.mean(trips):.2f} (max {max(trips)})" if trips else "-"


def arms_table(rows: list[Row], n: int) -> list[str]:
    lines = [
        "| RTT asked (measured) | arm | p50 ms | p95 ms | calls per request | round trips per"
        " request, mean (max) | embedder calls per request |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        for name, arm in row.arms.items():
            p50, p95 = p50_p95(arm.seconds)
            lines.append(
                f"| {row.rtt:g} ms ({row.measured_rtt:.1f}) | {name} | {p50:,.1f} | {p95:,.1f} |"
                f" {calls_text(arm, n)} | {trips_text(row.trips[name]) if name != CHROMA else '-'}"
                f" | {arm.embedder_calls / n:.1f} |"
            )
    return lines


def ratio(row: Row) -> float:
    return p50_p95(row.arms[COPY_ON].seconds)[1] / p50_p95(row.arms[READER].seconds)[1]


def mean_trips(row: Row) -> float:
    return statistics.mean(row.trips[COPY_ON])


def verdicts(rows: list[Row]) -> list[str]:
    lines = []
    for row in rows:
        r, trips = ratio(row), mean_trips(row)
        lines.append(
            f"- {row.rtt:g} ms: open_collection() p95 / ServingReader p95 **{r:.2f}x** (goal <="
            f" {GOALS['vs_reader']:g}x: {_met(r <= GOALS['vs_reader'])}); open_collection()"
            f" round trips per request **{trips:.2f}** (goal <= {GOALS['round_trips']:g}:"
            f" {_met(trips <= GOALS['round_trips'])}); the change watch's heartbeats"
            f" {row.heartbeats:.1f} round trips/s beside them."
        )
        if CHROMA in row.arms:
            (c50, c95), (p50, p95) = p50_p95(row.arms[CHROMA].seconds), p50_p95(
                row.arms[COPY_ON].seconds)  # fmt: skip
            low = min(c50 / p50, c95 / p95)
            lines.append(
                f"- {row.rtt:g} ms: Chroma / open_collection() **{c50 / p50:.1f}x** at p50,"
                f" **{c95 / p95:.1f}x** at p95 (goal >= {GOALS['vs_chroma']:g}x:"
                f" {_met(low >= GOALS['vs_chroma'])})."
            )
    return lines


def threads_part(results: dict[float, Throughput], pool: int) -> tuple[list[str], float | None]:
    lines = [
        "| RTT | threads | requests | requests/s | round trips per request | connections opened"
        " (lanes) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for t in results.values():
        lines.append(f"| {t.rtt:g} ms | {t.threads} | {t.requests} | {t.per_second:.1f} |"
                     f" {t.trips_per_request:.2f} | {t.lanes} |")  # fmt: skip
    base, far = results.get(0.0), results.get(THREADS_RTT) or results[max(results)]
    share = far.per_second / base.per_second if base is not None and base is not far else None
    open_now = next(iter(results.values())).connections
    lines += ["", f"Connections open at the collection's proxy after the rounds: {open_now}"
              f" (CANDLEFIRE_PG_POOL_SIZE {pool}: the lanes are bounded by it; the watch keeps"
              " one of its own)."]  # fmt: skip
    if share is not None:
        lines.append(
            f"{far.threads} threads at {far.rtt:g} ms reach **{share:.2f}x** their 0 ms"
            f" requests/s (goal >= {GOALS['threads']:g}x: {_met(share >= GOALS['threads'])})."
        )
    return lines, share


def staleness_part(windows: list[Windows], bound_ms: int, commits: int) -> list[str]:
    by = {(w.rtt, w.kind): w for w in windows}
    lines = [
        "| RTT | " + " | ".join(f"{kind}: median / max ms" for kind in KINDS)
        + " | stale answers served before the new content (copy on, median) |",
        "|---:|" + "---:|" * (len(KINDS) + 1),
    ]  # fmt: skip
    for rtt in dict.fromkeys(w.rtt for w in windows):
        cells = [f"{by[rtt, k].median_ms:,.1f} / {by[rtt, k].max_ms:,.1f}" for k in KINDS]
        stale = statistics.median(by[rtt, ON].stale)
        lines.append(f"| {rtt:g} ms | {' | '.join(cells)} | {stale:g} |")
    worst = max(w.max_ms for w in windows if w.kind == LOST)
    lines += ["", f"{commits} commits per RTT and arm. The configured bound"
              f" (CANDLEFIRE_APP_STALENESS_MS) is **{bound_ms:,} ms**: with notifications lost the"
              f" heartbeat (every {bound_ms / 3:,.0f} ms) moved the copy, the longest window"
              f" {worst:,.0f} ms; should the heartbeat fail too, no answer is served from the copy"
              f" later than {bound_ms:,} ms after the last heartbeat that proved it."]  # fmt: skip
    return lines


def closing_lines(rows: list[Row], share: float | None, threads: int,
                  install: Install | None) -> list[str]:  # fmt: skip
    new = {row.rtt: row for row in rows if row.kind == NEW}
    lines = []
    for rtt in LINE_RTTS:
        row = new.get(rtt)
        if row is None:
            lines.append(f"app-network {rtt:g}ms: not measured in this run")
            continue
        c95, r95 = (p50_p95(row.arms[n].seconds)[1] for n in (COPY_ON, READER))
        lines.append(f"app-network {rtt:g}ms: collection p95 {c95:,.1f} ms, reader p95"
                     f" {r95:,.1f} ms ({ratio(row):.2f}x); round trips per request"
                     f" {mean_trips(row):.2f}")  # fmt: skip
    lines.append(
        f"app-network threads: {threads} threads at {THREADS_RTT:g} ms reach"
        f" {'-' if share is None else f'{share:.2f}'}x their 0 ms requests/s"
    )
    lines.append(install.line() if install is not None else "app-install: not measured")
    return lines


def markdown(result: dict, note: str) -> str:
    rows, n = result["rows"], result["requests"]
    lines = [
        "## The app across a network: open_collection() vs ServingReader by round-trip time"
        " (issue 52)",
        "",
        f"candle-fire's search path (`benchmarks/app/search_path.py`, ~80 collection calls a"
        f" request) at {result['size']:,} chunks, {n} requests per row, through a loopback delay"
        " proxy in a child process in front of the embedded Postgres (rtt/2 each way; RTT"
        " measured = median `SELECT 1` through the proxies), one proxy per arm so each arm's"
        " round trips are counted on the wire: `open_collection()` with its defaults (the"
        " process copy on, CANDLEFIRE_APP_STALENESS_MS"
        f" {result['staleness_ms']}), `ServingReader.retrieve`, and `open_collection()` with the"
        " copy off (staleness 0: every call asks Postgres, the per-call path issue 52 measured);"
        " at 0 ms the real Chroma collection's same calls (local, as candle-fire ships it). The"
        " arms are interleaved request by request in a rotating order, warm (an untimed pass over"
        " the name pool and the requests at 0 ms first). **New question texts**: each request's"
        " claim with a suffix naming the RTT, never seen by any arm, its 12 entity names and 3"
        " codes seen in the warm pass (a Space's traffic). **Repeated requests**: the warm"
        " pass's requests word for word, which the copy answers whole (Chroma not run). The"
        " collection's round trips are those of its connections (application_name"
        " `candlefire-app`); its change watch's heartbeats (`candlefire-app-watch`) are counted"
        " apart.",
        "",
        f"**{NEW}:**",
        "",
        *arms_table([r for r in rows if r.kind == NEW], n),
        "",
        f"**{REPEATED} (word for word, as in the warm pass):**",
        "",
        *arms_table([r for r in rows if r.kind == REPEATED], n),
        "",
        *verdicts([r for r in rows if r.kind == NEW]),
        "",
    ]
    share = None
    if result.get("threads"):
        table, share = threads_part(result["threads"], result["pool_size"])
        lines += [
            f"**App threads** sharing the warm copy-on collection, new question texts per"
            f" request, {result['rounds']} rounds alternating the RTTs:",
            "",
            *table,
            "",
        ]
    if result.get("staleness"):
        lines += [
            "**The staleness window**: a drop committed (replace_papers of one paper, through a"
            " direct connection: the pipeline's writer) while a collection across the proxy"
            " serves a `get` of that paper every ms; from the commit (its notification's arrival"
            " on a direct local connection) to the first answer showing the new text:",
            "",
            *staleness_part(result["staleness"], result["staleness_ms"], result["commits"]),
            "",
        ]
    install = result.get("install")
    if install is not None:
        lines += [
            f"**The install**: a fresh venv, `pip install -c constraints.txt <repo>` (not"
            f" editable; the repo's tracked files) in {install.seconds:.0f} s: site-packages"
            " less what pip and setuptools installed (pip, setuptools, pkg_resources,"
            " _distutils_hack); distributions as `pip list` less pip"
            " and setuptools; import CPU the median over 5 fresh processes of"
            " time.process_time() around `import candlefire_pipeline.app`.",
            "",
        ]
    count = next(iter(result["threads"].values())).threads if result.get("threads") else 0
    lines += [note, "", *closing_lines(rows, share, count, install)]
    return "\n".join(lines)
