"""Shadow reads under load: 8 client threads through the app-facing reader on the 62k-chunk
workload, pgvector serving (promoted) and Chroma in the shadow at rate 1.0, against shadowing
off in the same run (phases off / on / on / off, so drift cancels).

Reports the served p95 and throughput with and without shadowing, their ratio, answer errors,
the replays dropped (queue full), lost and finished during the load, and the coverage. The
stores are the retrieval benchmark's, cached under data/bench_retrieval (built on first use).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace

from benchmarks.common.data import LATENCY_CHUNKS, bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import latency_workload
from benchmarks.common.stores import (
    embedded_postgres,
    ensure_indexes,
    load,
    open_store,
    serving_deployment,
    sized_label,
)
from benchmarks.shadow.benchmark import Scenario
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.shadow.served import ShadowWorker
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.settings import Settings, ShadowSettings

logger = logging.getLogger(__name__)
WARM_UP_S = 10.0


@dataclass
class Phase:
    shadow: bool
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0


def client(reader: ServingReader, requests, phase: Phase, until: float, offset: int) -> None:
    i = offset
    while time.monotonic() < until:
        request = requests[i % len(requests)]
        i += 1
        started = time.perf_counter()
        try:
            reader.retrieve(request.query, request.entities, request.terms)
        except Exception as exc:  # counted: the figure is "zero errors"
            phase.errors.append(f"{type(exc).__name__}: {exc}")
            continue
        phase.seconds.append(time.perf_counter() - started)


def run_phase(readers, requests, phase: Phase, seconds: float) -> Phase:
    started = time.monotonic()
    until = started + seconds
    threads = [
        threading.Thread(target=client, args=(r, requests, phase, until, i * 7))
        for i, r in enumerate(readers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    phase.wall = time.monotonic() - started
    return phase


def measure(settings: Settings, embedder, requests, clients: int, seconds: float) -> dict:
    """Phases off, on, on, off of seconds/2 each; the worker lives through both on phases."""
    unshadowed = replace(settings, shadow=replace(settings.shadow, rate=0.0))
    plain = [ServingReader(unshadowed, embedder) for _ in range(clients)]
    worker = ShadowWorker(settings)
    shadowed = [ServingReader(settings, embedder, shadow=worker) for _ in range(clients)]
    run_phase(plain, requests, Phase(False), WARM_UP_S)  # connections, caches, first embeds
    warm = requests[0]
    shadowed[0].retrieve(warm.query, warm.entities, warm.terms)  # the worker opens its stores
    worker.drain(600)
    before = dict(vars(worker.stats))
    half = seconds / 2
    phases = [run_phase(plain, requests, Phase(False), half)]
    phases += [run_phase(shadowed, requests, Phase(True), half) for _ in range(2)]
    during = {k: v - before[k] for k, v in vars(worker.stats).items() if k != "last_warning"}
    phases.append(run_phase(plain, requests, Phase(False), half))
    worker.close()
    for reader in (*plain, *shadowed):
        reader.close()
    return {"phases": phases, "stats": during}


def figures(result: dict) -> dict:
    """Served latency and throughput per shadowing mode, and what became of the replays."""
    out = {}
    for flag in (False, True):
        phases = [p for p in result["phases"] if p.shadow == flag]
        seconds = [s for p in phases for s in p.seconds]
        out[flag] = {
            "requests": len(seconds),
            "errors": sum(len(p.errors) for p in phases),
            "rate": len(seconds) / sum(p.wall for p in phases),
            "p50": metrics.p50(seconds) * 1e3,
            "p95": metrics.p95(seconds) * 1e3,
        }
    out["ratio"] = out[True]["p95"] / out[False]["p95"]
    out["errors"] = [e for p in result["phases"] for e in p.errors]
    return out


def row(scenario: Scenario, result: dict) -> str:
    f, stats = figures(result), result["stats"]
    coverage = 100 * stats["done"] / max(stats["sampled"], 1)
    return (
        f"| {scenario.served} -> {scenario.shadow} | {scenario.clients} | {scenario.priority} |"
        f" {f[False]['p95']:.0f} | {f[True]['p95']:.0f} |"
        f" **{f['ratio']:.3f}** | {f[False]['rate']:.2f} / {f[True]['rate']:.2f} |"
        f" {f[False]['errors'] + f[True]['errors']} | {stats['sampled']} |"
        f" {stats['dropped_full']} | {stats['lost']} | {stats['done']} | {coverage:.1f}% |"
    )


def summary(results: list, seconds: float, size: int, requests: int) -> list[str]:
    lines = [
        f"Client threads, each with its own `ServingReader`, for {seconds:g} s with shadowing"
        f" off and {seconds:g} s at `CANDLEFIRE_SHADOW_RATE=1.0` (phases off / on / on / off in"
        f" one process, after a {WARM_UP_S:g}-s warm-up) on {size:,} chunks (the retrieval"
        f" latency workload, its {requests} requests in turn). One shadow worker process, one"
        " replay at a time, queue 64; `CANDLEFIRE_SHADOW_PRIORITY` varies (idle = SCHED_IDLE,"
        " the default)."
        " The first row is the issue's figure: pgvector promoted, 8 clients, Chroma (seconds of"
        " CPU per read) in the shadow.",
        "",
        "| served -> shadow | clients | worker priority | served p95 off ms | served p95 on ms |"
        " p95 on / off | req/s off / on | answer errors | replays sampled | dropped (queue full)"
        " | lost | replayed during the load | coverage |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(row(scenario, result) for scenario, result in results),
        "",
        "Replayed during the load = replays finished while the shadowed phases ran;"
        " coverage = that / sampled. The issue's bound on the p95 ratio is 1.05.",
    ]
    errors = [e for _, r in results for e in figures(r)["errors"]]
    if errors:
        lines.append(f"First answer error: {errors[0]}")
    return lines


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    work = latency_workload(embedder, args.size)
    label = sized_label("latency", args.size, LATENCY_CHUNKS)
    results = []
    with embedded_postgres() as dsn, LoadMonitor(markers=[bench_dir()]) as monitor:
        for name in ("pgvector", "chroma"):
            store = open_store(name, dsn, label)
            load(store, work.rows, embedder.model_id, embedder.dim)
            if name == "pgvector":
                ensure_indexes(store)
            store.close()
        for scenario in args.scenarios:
            settings = serving_deployment(dsn, label, scenario.served)
            shadow = ShadowSettings(rate=1.0, priority=scenario.priority)
            logger.info("scenario %s", scenario)
            result = measure(replace(settings, shadow=shadow), embedder,
                             work.requests(args.requests), scenario.clients,
                             args.seconds)  # fmt: skip
            results.append((scenario, result))
    lines = summary(results, args.seconds, work.rows.num_rows, args.requests)
    markdown = "\n".join(["## Shadow reads under load", "", *lines, "", monitor.note()])
    out.section("shadow", markdown)
