"""Cold start to first answer at 62,196 chunks: a fresh process builds the app-facing reader
(operations/reader.ServingReader) and answers one full retrieve(), per store, same run.

- chroma: as candle-fire ships it: the persisted folder copied from a "dataset" location into
  the app's data dir (candle-fire downloads it at boot: the download at a stated bandwidth is
  shown beside it, DERIVED from the folder's bytes), then opened and queried;
- pgvector: the app connects to a running server (nothing copied); also with the server just
  restarted (empty shared buffers);
- qdrant: local mode, its folder copied like Chroma's, then opened (local mode loads every point);
- the flipped candle-fire app: `open_collection()` and candle-fire's search path for one request
  (cold_start/collection_child.py), its Postgres across a loopback delay proxy (a child process
  started before the exec, candlefire_harness.netdelay_process) at 0 and at 10 ms RTT.

Each run is a new interpreter (cold_start/child.py) with a fresh data dir; the ONNX query model
is the app's own file in every case. The OS page cache is warm for every store (the dataset was
just built or copied), as on a machine that has downloaded it.
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
from pathlib import Path

from benchmarks.common.data import bench_dir
from benchmarks.common.figures import MB
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.stores import (
    chroma_path,
    ensure_pg_table,
    folder_bytes,
    load_chroma,
    load_qdrant,
    qdrant_path,
)
from benchmarks.common.scaled.tables import table_name
from candlefire_harness.netdelay_process import DelayProxyProcess
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.serving.machine import PROMOTED, ServingState
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
#: The flipped app's runs: their Postgres behind a delay proxy at this RTT (ms).
COLLECTIONS = {"pgvector, open_collection(), 0 ms RTT": 0.0,
               "pgvector, open_collection(), 10 ms RTT": 10.0}  # fmt: skip
RUNS = ("chroma", "pgvector", "pgvector, server restarted", "qdrant", *COLLECTIONS)
PHASES = ("imports", "fetch", "model", "open", "first query")
#: Issue #25: pgvector's store phases (connect + first query) <= this share of Chroma's.
STORE_SHARE_GOAL = 0.2


def child_env(app: Path, size: int, dsn: str) -> dict[str, str]:
    table = table_name(size)
    return {
        **os.environ,
        "CANDLEFIRE_DATA_DIR": str(app),
        "CANDLEFIRE_ONNX_DIR": str(Settings.from_env().onnx_dir),
        "CANDLEFIRE_PG_DSN": dsn,
        "CANDLEFIRE_PG_TABLE": table,
        "CANDLEFIRE_CHROMA_COLLECTION": table,
        "CANDLEFIRE_QDRANT_COLLECTION": table,
    }


def run_once(run: str, size: int, request: dict, server: EmbeddedPostgres) -> dict:
    if run.endswith("restarted"):
        server.stop()
    dsn = server.dsn  # starts the server if it was stopped (not timed: it is a service)
    if run not in COLLECTIONS:
        return _started(run, size, request, dsn)
    with DelayProxyProcess.for_dsn(dsn, COLLECTIONS[run]) as proxy:  # started before the exec
        return _started(run, size, request, proxy.proxied_dsn(dsn))


def _started(run: str, size: int, request: dict, dsn: str) -> dict:
    store = run.split(",")[0]
    app = Path(tempfile.mkdtemp(prefix="cold-start-app-"))
    try:
        if store == "pgvector":
            state = ServingState(PROMOTED, report_id="bench-cold-start")
            (app / "serving_backend.json").write_text(state.to_json())
        dataset = {"chroma": chroma_path(size), "qdrant": qdrant_path(size)}.get(store)
        command = [sys.executable, "-m", "benchmarks.cold_start.child", "--store", store,
                   "--request", json.dumps(request)]  # fmt: skip
        if run in COLLECTIONS:  # the flipped app: its collection and its own search path
            command = [sys.executable, "-m", "benchmarks.cold_start.collection_child",
                       "--request", json.dumps(request)]  # fmt: skip
        if dataset is not None:
            command += ["--dataset", str(dataset)]
        exec_at = time.time()
        done = subprocess.run(command, env=child_env(app, size, dsn), capture_output=True,
                              text=True, timeout=3600, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{run} cold start failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(app, ignore_errors=True)
    s = result["stamps"]
    result["phases"] = {
        "imports": s["imported"] - exec_at,
        "fetch": s["fetched"] - s["imported"],
        "model": s["model"] - s["fetched"],
        "open": s["opened"] - s["model"],
        "first query": s["answered"] - s["opened"],
    }
    result["total"] = s["answered"] - exec_at
    log.info("%s: %s", run, {k: round(v, 2) for k, v in result["phases"].items()})
    return result


def median_phases(results: list[dict]) -> dict[str, float]:
    out = {p: statistics.median(r["phases"][p] for r in results) for p in PHASES}
    out["store"] = statistics.median(r["phases"]["open"] + r["phases"]["first query"]
                                     for r in results)  # fmt: skip
    out["total"] = statistics.median(r["total"] for r in results)
    return out


def collection_line(runs: dict[str, list[dict]], chroma: dict, pg: dict) -> str:
    """The flipped app's cold starts (0 and 10 ms RTT) beside Chroma's and ServingReader's, and
    what it loaded."""
    parts = []
    for run, rtt in COLLECTIONS.items():
        m = median_phases(runs[run])
        parts.append(f"at {rtt:g} ms RTT **{m['total']:.1f} s** (imports {m['imports']:.2f} s,"
                     f" store open {m['open']:.2f} s, the search path's first answer"
                     f" {m['first query']:.2f} s)")  # fmt: skip
    loaded = sorted({m for run in COLLECTIONS for r in runs[run] for m in r.get("loaded", [])})
    return (
        "The flipped app, a fresh process to the first answer of candle-fire's search path"
        f" through `open_collection()`: {'; '.join(parts)}; Chroma as candle-fire ships it"
        f" {chroma['total']:.1f} s without its download, `ServingReader` on a local socket"
        f" {pg['total']:.1f} s. Heavy modules the flipped app loaded:"
        f" {', '.join(loaded) or 'none'} (of chromadb, dagster, torch, sentence_transformers)."
    )


def markdown(size: int, runs: dict[str, list[dict]], dataset_bytes: dict, args, note: str) -> str:
    model_bytes = folder_bytes(Settings.from_env().onnx_dir)
    lines = [
        f"A fresh process per run builds `ServingReader` and answers one full `retrieve()`"
        f" (SciFact claim + 12 entity names + 3 codes) over {size:,} chunks (the retrieval"
        f" workload); {args.repeats} runs per store, rotated; medians in seconds. Every app holds"
        f" the ONNX query model locally ({model_bytes / MB:,.0f} MB). fetch = copying the store's"
        " folder from the dataset location into the app's data dir (candle-fire's boot"
        " download, done locally here); store = open + first query. The last two rows are the"
        " flipped candle-fire app: `open_collection()` (open = it and its first call, `count()`)"
        " and candle-fire's own search path for the same request (benchmarks/app/search_path.py:"
        " one collection call per stage, name and variant), its Postgres behind a loopback delay"
        " proxy at 0 and at 10 ms RTT.",
        "",
        "| store | process + imports | fetch (local copy) | model load | store open |"
        " first query | **store phases** | to first answer | store bytes held by the app |"
        " RSS after first answer MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    medians = {run: median_phases(results) for run, results in runs.items()}
    for run, results in runs.items():
        m = medians[run]
        held = statistics.median(r["store_bytes"] for r in results)
        rss = statistics.median(r["rss"] for r in results) / MB
        lines.append(
            f"| {run} | {m['imports']:.2f} | {m['fetch']:.2f} | {m['model']:.2f} |"
            f" {m['open']:.2f} | {m['first query']:.2f} | **{m['store']:.2f}** |"
            f" {m['total']:.2f} | {held / MB:,.1f} MB | {rss:,.0f} |"
        )
    chroma, pg = medians["chroma"], medians["pgvector"]
    share = pg["store"] / chroma["store"]
    bandwidth = args.bandwidth * 1e6
    download = dataset_bytes["chroma"] / bandwidth
    held_pg = max(r["store_bytes"] for r in runs["pgvector"])
    lines += [
        "",
        f"pgvector's store phases (connect + first query) / Chroma's (open + first query):"
        f" {pg['store']:.2f} / {chroma['store']:.2f} s = **{share:.2f}** (goal <="
        f" {STORE_SHARE_GOAL}, {'met' if share <= STORE_SHARE_GOAL else 'NOT met'}); to first"
        f" answer {pg['total']:.1f} s vs {chroma['total']:.1f} s without any download.",
        f"Index bytes the pgvector app holds: **{held_pg:,}** (goal 0,"
        f" {'met' if held_pg == 0 else 'NOT met'}); Chroma's app holds"
        f" {dataset_bytes['chroma'] / MB:,.0f} MB, Qdrant's"
        f" {dataset_bytes['qdrant'] / MB:,.0f} MB.",
        collection_line(runs, chroma, pg),
        f"Download at boot, **derived** (folder bytes / {args.bandwidth:g} MB/s, not measured):"
        f" Chroma {download:.1f} s at this size, so {chroma['total'] + download:.1f} s to first"
        f" answer; candle-fire's real 1.2 GB dataset: {1.2e9 / bandwidth:.0f} s of download"
        " before the first answer.",
        "",
        note,
    ]
    return "\n".join(lines)


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    server = EmbeddedPostgres(bench_dir() / "pg")
    try:
        corpus = ensure_pg_table(server.dsn, embedder, args.size)
        load_chroma(corpus)
        load_qdrant(corpus)
        first = corpus.requests(1)[0]
        request = {"query": first.query, "entities": list(first.entities),
                   "terms": list(first.terms)}  # fmt: skip
        monitor = LoadMonitor(markers=[bench_dir()]).start()
        runs: dict[str, list[dict]] = {kind: [] for kind in RUNS}
        for repeat in range(args.repeats):
            order = RUNS[repeat % len(RUNS) :] + RUNS[: repeat % len(RUNS)]
            for kind in order:
                runs[kind].append(run_once(kind, args.size, request, server))
        note = monitor.stop().note()
    finally:
        server.stop()
    dataset = {"chroma": folder_bytes(chroma_path(args.size)),
               "qdrant": folder_bytes(qdrant_path(args.size))}  # fmt: skip
    text = markdown(args.size, runs, dataset, args, note)
    out.section("cold-start", "## Cold start to first answer\n\n" + text)
