"""Throughput of one shared reader: 1, 2, 4 and 8 client threads for 60 s each, pgvector and
Chroma in the same run (the app keeps one ServingReader and serves requests concurrently).

Each store gets its own ServingReader (pgvector: the switch says promoted; Chroma: never
promoted) over the retrieval benchmark's 62,196-chunk workload; every thread loops over the
request mix (SciFact claim + 12 entity names + 3 codes) calling `reader.retriever().retrieve()`. Per
thread count and store: completed requests per second, latency p50 / p95, errors (by type).
"""

from __future__ import annotations

import itertools
import logging
import tempfile
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from benchmarks.common.data import bench_dir
from benchmarks.common.figures import ms
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.stores import chroma_path, ensure_pg_table, load_chroma
from benchmarks.common.scaled.tables import table_name
from benchmarks.common.stores import embedded_postgres
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.machine import PROMOTED, ServingState
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
STORES = ("pgvector", "chroma")


def reader_for(store: str, app: Path, dsn: str, size: int, embedder) -> ServingReader:
    """A ServingReader whose switch serves `store`, over the size's table / collection."""
    app.mkdir(parents=True, exist_ok=True)
    table = table_name(size)
    settings = replace(Settings.from_env().with_data_dir(app), pg_dsn=dsn, pg_table=table,
                       chroma_collection=table)  # fmt: skip
    if store == "pgvector":
        settings.serving_file.write_text(ServingState(PROMOTED, report_id="bench").to_json())
    else:
        settings.chroma_path.symlink_to(chroma_path(size), target_is_directory=True)
    reader = ServingReader(settings, embedder=embedder)
    if reader.retriever() is None or reader.backend_name != store:
        raise RuntimeError(f"the reader serves {reader.backend_name}, not {store}")
    return reader


def drive(reader: ServingReader, requests, threads: int, seconds: float) -> dict:
    """`threads` clients on one reader for `seconds`; every finished request counted."""
    mix = itertools.cycle(requests)
    lock, stop = threading.Lock(), threading.Event()
    latencies: list[float] = []
    errors: Counter = Counter()

    def client() -> None:
        while not stop.is_set():
            with lock:
                request = next(mix)
            started = time.perf_counter()
            try:
                reader.retriever().retrieve(request.query, request.entities, request.terms)
            except Exception as exc:  # counted and reported: the run goes on
                errors[type(exc).__name__] += 1
                continue
            took = time.perf_counter() - started
            if not stop.is_set():
                with lock:
                    latencies.append(took)

    workers = [threading.Thread(target=client, name=f"client-{i}") for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    stop.wait(seconds)
    stop.set()
    elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join()
    return {"threads": threads, "done": len(latencies), "rate": len(latencies) / elapsed,
            "latencies": latencies, "errors": dict(errors)}  # fmt: skip


def markdown(results: dict[str, list[dict]], args, hit_rates: dict, note: str) -> str:
    lines = [
        "## Throughput of one shared reader",
        "",
        f"One `ServingReader` per store over {args.size:,} chunks (the retrieval workload),"
        f" shared by 1-{max(args.threads)} client threads for {args.seconds:.0f} s each; every"
        f" thread loops over {args.requests} requests (SciFact claim + 12 entity names + 3 codes,"
        " real ONNX query embedding, the query-vector cache and pgvector's term cache on as"
        " shipped, pgvector warmed by one pass over the mix); stores alternate per thread count."
        " A request finishing after the window is not counted.",
        "",
        "| store | threads | requests/s | p50 / p95 ms | completed | errors |",
        "|---|---:|---:|---|---:|---|",
    ]
    for store, rows in results.items():
        for r in rows:
            errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
            lines.append(
                f"| {store} | {r['threads']} | {r['rate']:.2f} | {ms(r['latencies'])} |"
                f" {r['done']} | {errors} |"
            )
    best = {s: max(rows, key=lambda r: r["rate"]) for s, rows in results.items()}
    lines += [
        "",
        "Best rate: "
        + "; ".join(
            f"{s} {b['rate']:.2f} requests/s at {b['threads']} threads" for s, b in best.items()
        )  # fmt: skip
        + f" (pgvector / Chroma {best['pgvector']['rate'] / best['chroma']['rate']:.0f}x)."
        " Cache hit rates over the run (query vectors; pgvector's kept terms): "
        + ", ".join(f"{s} {h:.0%}" for s, h in hit_rates.items())
        + ".",
        "",
        note,
    ]
    return "\n".join(lines)


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    results: dict[str, list[dict]] = {s: [] for s in STORES}
    with embedded_postgres() as dsn, tempfile.TemporaryDirectory() as tmp:
        corpus = ensure_pg_table(dsn, embedder, args.size)
        load_chroma(corpus)
        requests = corpus.requests(args.requests)
        readers = {s: reader_for(s, Path(tmp) / s, dsn, args.size, embedder) for s in STORES}
        # warm: connection, index pages, ONNX session; pgvector's term cache after one pass
        # over the mix (Chroma, which keeps nothing, after three requests)
        for store, reader in readers.items():
            for r in requests if store == "pgvector" else requests[:3]:
                reader.retriever().retrieve(r.query, r.entities, r.terms)
        monitor = LoadMonitor(markers=[bench_dir()]).start()
        for i, threads in enumerate(args.threads):
            for store in STORES if i % 2 == 0 else STORES[::-1]:
                results[store].append(drive(readers[store], requests, threads, args.seconds))
                log.info("%s x%d: %.2f requests/s", store, threads, results[store][-1]["rate"])
        note = monitor.stop().note()
        hit_rates = {s: r.vector_cache.hit_rate for s, r in readers.items()}
        terms = readers["pgvector"].retriever().backend.terms.stats
        hit_rates["pgvector term cache"] = terms.hit_rate
        for reader in readers.values():
            reader.close()
    results = {s: sorted(rows, key=lambda r: r["threads"]) for s, rows in results.items()}
    out.section("concurrency", markdown(results, args, hit_rates, note))
