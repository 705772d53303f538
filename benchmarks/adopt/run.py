"""The adopt benchmark: per size, an app collection built by candle-fire's indexing rules, then
in fresh processes (each its own peak RSS) interleaved per repeat: a bare paginated get of every
row (the floor: what reading the collection costs at all), `adopt report` and `adopt import`
(into an empty ledger, pgvector and Chroma). Rates are rows of the app's collection per second;
the ratios are each operation's rate over the floor's, measured in the same run.
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
OPERATIONS = ("floor", "report", "import")


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
        "size) in the same run. The import writes an empty ledger, pgvector and Chroma.",
        "",
        "| rows | floor rows/s | report rows/s | report x floor | import rows/s | import x floor "
        "| import: read + compare / publish / apply (pgvector, Chroma) s | peak RSS MB: floor / "
        "report / import |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in results.items():
        rate = {name: size / median(runs[name]) for name in OPERATIONS}
        rss = " / ".join(f"{max(r['peak_rss'] for r in runs[n]) / MB:,.0f}" for n in OPERATIONS)
        phases = (f"{part(runs['import'], 'read_and_compare'):.1f} / "
                  f"{part(runs['import'], 'publish'):.1f} / {part(runs['import'], 'apply'):.1f}"
                  f" ({applied(runs['import'], 'pgvector'):.1f}, "
                  f"{applied(runs['import'], 'chroma'):.1f})")  # fmt: skip
        lines.append(
            f"| {size:,} | {rate['floor']:,.0f} | {rate['report']:,.0f} | "
            f"{rate['report'] / rate['floor']:.2f}x | {rate['import']:,.0f} | "
            f"{rate['import'] / rate['floor']:.2f}x | {phases} | {rss} |"
        )
    sizes = sorted(results)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]

        def peak(size: int, name: str) -> float:
            return max(r["peak_rss"] for r in results[size][name])

        growth = {name: peak(large, name) / peak(small, name) for name in OPERATIONS}
        lines += ["", f"Peak RSS {large:,} / {small:,} rows ({large / small:.1f}x the rows): "
                  + ", ".join(f"{n} {g:.2f}x" for n, g in growth.items()) + "."]  # fmt: skip
        importing = {s: results[s]["import"] for s in sizes}
        ledger = {s: s / (part(importing[s], "read_and_compare") + part(importing[s], "publish"))
                  for s in sizes}  # fmt: skip
        floor = {s: s / median(results[s]["floor"]) for s in sizes}
        lines += ["", "The import without its store writes (read, validate, compare, model "
                  "check, publish the ledger's parts): " + ", ".join(
                      f"{ledger[s]:,.0f} rows/s = {ledger[s] / floor[s]:.2f}x floor at {s:,}"
                      for s in sizes) + "."]  # fmt: skip
    lines += ["", load.note()]
    return "\n".join(lines)


def run(args, out) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("CANDLEFIRE_STORES", "pgvector,chroma")
    results = {}
    with LoadMonitor() as load, embedded_postgres() as dsn:
        for size in args.sizes:
            app_folder(size)  # built before the clock: the app's collection exists already
            results[size] = measure(size, dsn, args.repeats)
    out.section("adopt", markdown(results, load))
