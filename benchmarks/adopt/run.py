"""The adopt benchmark: per size, an app collection built by candle-fire's indexing rules, then
in fresh processes (each its own peak RSS) interleaved per repeat: a bare paginated get of every
row (the floor: what reading the collection costs at all), `adopt report`, `adopt import` (into
an empty ledger, pgvector and Chroma) and a bare Chroma `add` of the same pages (what writing
them into Chroma costs at all). Rates are rows of the app's collection per second; the ratios
are each operation's rate over the floor's, measured in the same run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg

from benchmarks.adopt.collection import app_folder
from benchmarks.common.figures import MB
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.stores import embedded_postgres

log = logging.getLogger(__name__)
OPERATIONS = ("floor", "report", "import", "add")
GOAL = 0.5  # the import's rate over the floor's (issue 42)


def child(*argv: str) -> dict:
    command = [sys.executable, "-m", "benchmarks.adopt.child", *argv]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=6 * 3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"adopt {argv[0]} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "process_seconds": time.perf_counter() - started}


def measure(size: int, dsn: str, repeats: int) -> dict[str, list[dict]]:
    folder = str(app_folder(size))
    runs: dict[str, list[dict]] = {name: [] for name in OPERATIONS}
    for repeat in range(repeats):
        with tempfile.TemporaryDirectory(prefix="adopt-bench-") as scratch:
            table = f"adopt_{size}_{repeat}"
            runs["floor"].append(child("floor", folder))
            runs["report"].append(child("report", folder, f"{scratch}/report"))
            runs["import"].append(child("import", folder, f"{scratch}/import", dsn, table))
            runs["add"].append(child("add", folder))
            with psycopg.connect(dsn, autocommit=True) as conn:
                for name in (table, f"{table}_meta", f"{table}_terms"):
                    conn.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
            shutil.rmtree(scratch, ignore_errors=True)
        log.info("adopt %d, repeat %d: %s", size, repeat + 1,
                 {k: round(v[-1]["seconds"], 1) for k, v in runs.items()})  # fmt: skip
    return runs


def median(runs: list[dict], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in runs)


def part(runs: list[dict], name: str) -> float:
    return statistics.median(r["parts"][name] for r in runs)


def applied(runs: list[dict], store: str) -> float:
    return statistics.median(r["applied"][store]["seconds"] for r in runs)


def markdown(results: dict[int, dict[str, list[dict]]], load: LoadMonitor) -> str:
    lines = [
        "## Adopting the app's collection (`python -m benchmarks adopt`)",
        "",
        "An app collection built by candle-fire's indexing rules (its metadata keys and types, "
        "cosine, 384-dim vectors of the deterministic hashing model, so that the model check "
        "names it), read through its snapshot. Each operation a fresh process; rows/s are the "
        "app's rows over the operation's wall seconds; x floor = that rate over a bare paginated "
        "`get` of the same collection (documents, metadatas, embeddings; the adoption's page "
        "size) in the same run. The import writes an empty ledger, pgvector (one first build of "
        "the empty table) and Chroma (part by part); bare add = the same pages `add`ed as they "
        "are to a new Chroma collection (the add calls alone), Chroma's own write rate.",
        "",
        "| rows | floor rows/s | report rows/s | report x floor | import rows/s | import x floor "
        "| import s: read + compare / publish / pgvector / Chroma | bare Chroma add rows/s "
        "| peak RSS MB: floor / report / import |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in results.items():
        rate = {name: size / median(runs[name]) for name in OPERATIONS}
        rss = " / ".join(f"{max(r['peak_rss'] for r in runs[n]) / MB:,.0f}"
                         for n in ("floor", "report", "import"))  # fmt: skip
        imports = runs["import"]
        phases = " / ".join(f"{seconds:.1f}" for seconds in (
            part(imports, "read_and_compare"), part(imports, "publish"),
            applied(imports, "pgvector"), applied(imports, "chroma")))  # fmt: skip
        lines.append(
            f"| {size:,} | {rate['floor']:,.0f} | {rate['report']:,.0f} | "
            f"{rate['report'] / rate['floor']:.2f}x | {rate['import']:,.0f} | "
            f"**{rate['import'] / rate['floor']:.2f}x** | {phases} | {rate['add']:,.0f} | {rss} |"
        )
    lines += ["", *_findings(results)]
    lines += ["", load.note()]
    return "\n".join(lines)


def _findings(results: dict[int, dict[str, list[dict]]]) -> list[str]:
    sizes = sorted(results)
    floor = {s: s / median(results[s]["floor"]) for s in sizes}
    imported = {s: s / median(results[s]["import"]) for s in sizes}
    ratios = ", ".join(f"{imported[s] / floor[s]:.2f}x at {s:,}" for s in sizes)
    met = all(imported[s] / floor[s] >= GOAL for s in sizes)
    ledger = {s: s / (part(results[s]["import"], "read_and_compare")
                      + part(results[s]["import"], "publish")) for s in sizes}  # fmt: skip
    chroma = {s: s / applied(results[s]["import"], "chroma") for s in sizes}
    bare = {s: s / median(results[s]["add"]) for s in sizes}
    found = [
        f"Goal import >= {GOAL}x floor: **{'met' if met else 'not met'}** ({ratios}).",
        "",
        "Where the import's time goes: reading, validating, comparing, the model check and "
        "publishing the ledger's parts run at " + ", ".join(
            f"{ledger[s]:,.0f} rows/s = {ledger[s] / floor[s]:.2f}x floor at {s:,}"
            for s in sizes) + "; the store writes take the rest. Chroma's write of the parts ran "
        "at " + ", ".join(f"{chroma[s] / bare[s]:.2f}x its bare add at {s:,}" for s in sizes)
        + ": a collection written at Chroma's own add rate cannot be imported faster than that "
        "rate, which is far below its read rate.",
    ]  # fmt: skip
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]

        def peak(size: int, name: str) -> float:
            return max(r["peak_rss"] for r in results[size][name])

        growth = {n: peak(large, n) / peak(small, n) for n in ("floor", "report", "import")}
        above = {n: [(peak(s, n) - peak(s, "floor")) / MB for s in (small, large)]
                 for n in ("report", "import")}  # fmt: skip
        found += ["", f"Peak RSS {large:,} / {small:,} rows ({large / small:.1f}x the rows): "
                  + ", ".join(f"{n} {g:.2f}x" for n, g in growth.items()) + ". Above the "
                  "floor's own peak (chromadb's client reading the same pages): " + ", ".join(
                      f"{n} +{a:,.0f} MB at {small:,}, +{b:,.0f} MB at {large:,}"
                      for n, (a, b) in above.items()) + "."]  # fmt: skip
    return found


def run(args, out) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("CANDLEFIRE_STORES", "pgvector,chroma")
    results = {}
    with LoadMonitor() as load, embedded_postgres() as dsn:
        for size in args.sizes:
            app_folder(size)  # built before the clock: the app's collection exists already
            results[size] = measure(size, dsn, args.repeats)
    out.section("adopt", markdown(results, load))
