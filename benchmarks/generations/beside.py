"""Index generations on the 62k workload: a new generation built beside the serving one vs a
cold rebuild, the cache hit ratio, the serving generation's retrieve() p95 while another one
builds vs idle (same run, queries from a separate process), and bytes per generation per store.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from pathlib import Path

from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.stores import scratch_dir
from benchmarks.generations.workload import serve, write_drops
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.embedding import EmbeddingCache, embedder_for
from candlefire_pipeline.generations.batches import embed_batch
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.generations.sizes import store_bytes
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.lifecycle import create_generation, registry
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, Settings

log = logging.getLogger(__name__)
#: What each generation built beside the serving one changes (benchmark.NEW_GENERATIONS).
NEW = {
    "halfvec": {"runtime": "onnx", "layout": IndexLayout("halfvec")},
    "int8": {"runtime": "onnx-int8", "layout": IndexLayout()},
}


def build(settings: Settings, generation, keys: list[str]) -> dict:
    """Embed (through the cache) and apply every drop to every fed store; timings and counts."""
    view = generation_settings(settings, generation)
    embedder = embedder_for(view, "bulk")
    embedder.embed(["warm-up"] * 4)  # model load is not building
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    facts = {"embedded": 0, "chunks": 0, "embed": 0.0}
    started = time.perf_counter()
    for key in keys:
        summary = embed_batch(settings, generation, key, embedder, cache)
        facts["embedded"] += summary.embedded
        facts["chunks"] += summary.chunks
    facts["embed"] = time.perf_counter() - started
    for store in settings.stores:
        backend = open_backend(store, view)
        started = time.perf_counter()
        try:
            for key in keys:
                apply_batch(backend, view.batches_dir, key, embedder.model_id, embedder.dim)
            facts[store] = time.perf_counter() - started
            facts[f"{store}_bytes"] = store_bytes(store, view, backend)
        finally:
            backend.close()
    facts["total"] = sum(facts[k] for k in ("embed", *settings.stores))
    log.info("%s built: %s", generation.name, facts)
    return facts


def build_while_serving(settings: Settings, generation, keys, requests, idle: int) -> dict:
    """build() while another process queries the serving generation (idle first)."""
    context = multiprocessing.get_context("spawn")
    results, stop = context.Queue(), context.Event()
    server = context.Process(target=serve, args=(settings, requests, idle, results, stop))
    server.start()
    phase, idle_seconds = results.get(timeout=3600)
    assert phase == "idle"
    facts = build(settings, generation, keys)
    stop.set()
    phase, busy_seconds = results.get(timeout=3600)
    server.join(timeout=600)
    return {**facts, "idle_s": idle_seconds, "busy_s": busy_seconds}


def run_all(
    root: Path, dsn: str, size: int, drops: int, idle: int, new: list[str]
) -> tuple[dict, int]:
    settings = Settings(
        data_dir=root / "data", drops_dir=root / "data" / "drops", pg_dsn=dsn,
        onnx_dir_override=Settings.from_env().onnx_dir,
    )  # fmt: skip
    keys, requests = write_drops(settings.batches_dir, size, drops)
    default = registry(settings).default
    results = {"cold": build(settings, default, keys)}
    for name in new:
        created = create_generation(settings, name, DEFAULT_MODEL_ID, actor="bench", **NEW[name])
        results[name] = build_while_serving(settings, created, keys, requests, idle)
    return results, len(keys)


def _ms(seconds: list[float]) -> str:
    return f"{len(seconds)} | {metrics.p50(seconds) * 1e3:.1f} | {metrics.p95(seconds) * 1e3:.1f}"


def _mb(value) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.1f}"


def markdown(results: dict, size: int, drops: int, load: LoadMonitor) -> str:
    cold = results["cold"]
    labels = {"halfvec": "beside it: halfvec layout (same model)",
              "int8": "beside it: onnx-int8 runtime (another model identity)"}  # fmt: skip
    built = [name for name in NEW if name in results]
    rows = [("cold rebuild: the serving generation (fp32, vector), empty cache and stores", cold),
            *((labels[name], results[name]) for name in built)]  # fmt: skip
    lines = [
        f"{cold['chunks']:,} chunks of the retrieval workload (SciFact text, ~1,000 "
        f"characters) as {drops} ingested drops; `{DEFAULT_MODEL_ID}` on ONNX Runtime; every "
        "generation fed to pgvector (embedded server), Chroma (local) and Qdrant (local mode), "
        "through the core stages the generation assets run (embed through the cache, then "
        "apply each drop to each store).",
        "",
        "| build | embedded | cache hits | embed s | pgvector s | chroma s | qdrant s | total s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, f in rows:
        hits = 1 - f["embedded"] / f["chunks"] if f["chunks"] else 0.0
        lines.append(
            f"| {label} | {f['embedded']:,} | {100 * hits:.1f}% | {f['embed']:.0f} | "
            f"{f['pgvector']:.0f} | {f['chroma']:.0f} | {f['qdrant']:.0f} | {f['total']:.0f} |"
        )
    beside = "halfvec" if "halfvec" in results else built[0]
    half = results[beside]
    rebuild = cold["embed"] + sum(half[s] for s in ("pgvector", "chroma", "qdrant"))
    lines += [
        "",
        f"{beside} beside the serving generation: **{half['total']:.0f} s** vs a cold rebuild "
        f"of the same layout **{rebuild:.0f} s** (derived: the cold embedding above + its own "
        f"loads) = **{rebuild / half['total']:.1f}x** faster; a new model identity (int8) has "
        "embedded none of these texts, so it embeds them all, beside or cold alike.",
        "",
        "Serving generation (pgvector, fp32, vector): full `retrieve()` from a separate "
        "process, idle just before each build, then for as long as the build runs:",
        "",
        "| phase | requests | p50 ms | p95 ms |",
        "|---|---:|---:|---:|",
    ]
    for name in built:
        lines.append(f"| idle (before {name}) | {_ms(results[name]['idle_s'])} |")
        lines.append(f"| while {name} builds | {_ms(results[name]['busy_s'])} |")
    lines += ["", "MB per generation per store (generations/sizes.py):", "",
              "| generation | pgvector | chroma | qdrant |", "|---|---:|---:|---:|"]  # fmt: skip
    for name, f in (("default (serving)", cold), *((n, results[n]) for n in built)):
        sizes = [_mb(f.get(f"{store}_bytes")) for store in ("pgvector", "chroma", "qdrant")]
        lines.append(f"| {name} | " + " | ".join(sizes) + " |")
    return "\n".join([*lines, "", load.note()])


def run(args, out) -> None:
    # the embedded server runs from the scratch folder: its CPU is the benchmark's own
    with scratch_dir("bench-generations-") as root, LoadMonitor(markers=[root]) as load:
        server = EmbeddedPostgres(root / "pg")
        try:
            results, drops = run_all(root, server.dsn, args.size, args.drops, args.idle, args.new)
        finally:
            server.stop()
    out.section("generations", markdown(results, args.size, drops, load))
