"""Shadow reads under load: 8 client threads through the app-facing reader on the 62k-chunk
workload, pgvector serving (promoted) and Chroma in the shadow at rate 1.0, against shadowing
off in the same run (phases off / on / on / off, so drift cancels).

Reports the served p50 / p95 and throughput with and without shadowing, their ratio, answer
errors, the replays dropped (queue full), lost and recorded, and the coverage.

Run: .venv/bin/python -m benchmarks.bench_shadow [--clients 8] [--seconds 60] [--served pgvector]
Stores are the ones bench_retrieval caches under data/bench_retrieval (built on first use).
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from dataclasses import dataclass, field, replace

from benchmarks.helpers import LoadMonitor, write_section
from benchmarks.retrieval_data import bench_dir
from benchmarks.retrieval_stores import embedded_postgres, ensure_indexes, load, open_store
from benchmarks.retrieval_workload import latency_workload
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving_state import INITIAL, PROMOTED, ServingState
from candlefire_pipeline.operations.shadow import ShadowWorker
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.settings import Settings, ShadowSettings

logger = logging.getLogger("bench_shadow")
LABEL = "latency"  # bench_retrieval's 62k-chunk stores
WARM_UP_S = 10.0


@dataclass
class Phase:
    shadow: bool
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0


def deployment(dsn: str, served: str) -> Settings:
    """Settings reading bench_retrieval's stores, the switch naming `served`."""
    env = Settings.from_env()
    settings = replace(
        env.with_data_dir(bench_dir()), onnx_dir_override=env.onnx_dir, pg_dsn=dsn,
        pg_table=LABEL, chroma_collection=LABEL, chroma_host=None, stores=("pgvector", "chroma"),
        serving_override=None,
    )  # fmt: skip
    state = ServingState(PROMOTED, "2026-01-01T00:00:00+00:00", "bench", "bench", "bench")
    settings.serving_file.write_text((state if served == "pgvector" else ServingState(INITIAL))
                                     .to_json())  # fmt: skip
    settings.shadow_pending_file.unlink(missing_ok=True)
    return settings


def client(reader: ServingReader, requests, phase: Phase, until: float, offset: int) -> None:
    i = offset
    while time.monotonic() < until:
        request = requests[i % len(requests)]
        i += 1
        started = time.perf_counter()
        try:
            reader.retrieve(request.query, request.entities, request.terms)
        except Exception as exc:  # noqa: BLE001 - counted: the figure is "zero errors"
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
    plain = [ServingReader(settings, embedder) for _ in range(clients)]
    shadowed_settings = replace(settings, shadow=ShadowSettings(rate=1.0))
    worker = ShadowWorker(shadowed_settings)
    shadowed = [ServingReader(shadowed_settings, embedder, shadow=worker) for _ in range(clients)]
    run_phase(plain, requests, Phase(False), WARM_UP_S)  # connections, caches, first embeds
    warm = requests[0]
    shadowed[0].retrieve(warm.query, warm.entities, warm.terms)  # the worker opens its stores
    worker.drain(600)
    before = vars(worker.stats).copy()
    half = seconds / 2
    phases = [run_phase(plain, requests, Phase(False), half)]
    phases += [run_phase(shadowed, requests, Phase(True), half) for _ in range(2)]
    on_done = worker.stats.done  # replays finished while the served load ran
    phases.append(run_phase(plain, requests, Phase(False), half))
    worker.close()
    for reader in (*plain, *shadowed):
        reader.close()
    stats = {k: v - before.get(k, 0) for k, v in vars(worker.stats).items() if k != "last_warning"}
    stats["done_during_load"] = on_done - before["done"]
    return {"phases": phases, "stats": stats}


def summary(result: dict, clients: int, seconds: float, served: str, shadow: str) -> list[str]:
    off = [s for p in result["phases"] if not p.shadow for s in p.seconds]
    on = [s for p in result["phases"] if p.shadow for s in p.seconds]
    errors = [e for p in result["phases"] for e in p.errors]
    wall = {flag: sum(p.wall for p in result["phases"] if p.shadow == flag) for flag in (0, 1)}
    stats = result["stats"]
    ratio = metrics.p95(on) / metrics.p95(off)
    lines = [
        f"{clients} client threads, each with its own `ServingReader`, for {seconds:g} s with"
        f" shadowing off and {seconds:g} s at `CANDLEFIRE_SHADOW_RATE=1.0` (phases off / on /"
        f" on / off, one process, after a {WARM_UP_S:g}-s warm-up); {served} serves, {shadow}"
        " is the shadow; 62,196 chunks (bench_retrieval's latency workload, its 60 requests in"
        " turn). The shadow worker is one process at SCHED_IDLE, one replay at a time, queue 64.",
        "",
        "| shadowing | requests | errors | req/s | served p50 ms | served p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, values, flag in (("off", off, 0), ("on (rate 1.0)", on, 1)):
        failed = sum(len(p.errors) for p in result["phases"] if p.shadow == flag)
        lines.append(
            f"| {name} | {len(values)} | {failed} | {len(values) / wall[flag]:.2f} | "
            f"{metrics.p50(values) * 1e3:.1f} | {metrics.p95(values) * 1e3:.1f} |"
        )
    sampled = stats["sampled"]
    lines += [
        "",
        f"Served p95 with shadowing on / off: **{ratio:.3f}** (the issue's bound: 1.05)."
        f" Answer errors: {len(errors)}{' (' + errors[0] + ')' if errors else ''}.",
        f"Replays: {sampled} sampled, {stats['queued']} queued, {stats['dropped_full']} dropped"
        f" (queue full), {stats['lost']} lost; {stats['done_during_load']} replayed while the"
        f" load ran ({stats['recorded']} comparisons recorded in all). Coverage under this load:"
        f" {100 * stats['done_during_load'] / max(sampled, 1):.1f}% of the sampled requests.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--served", choices=("pgvector", "chroma"), default="pgvector")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    embedder = embedder_for(Settings.from_env(), "query")
    work = latency_workload(embedder)
    with embedded_postgres() as dsn:
        for name in ("pgvector", "chroma"):
            store = open_store(name, dsn, LABEL)
            load(store, work.rows, embedder.model_id, embedder.dim)
            if name == "pgvector":
                ensure_indexes(store)
            store.close()
        settings = deployment(dsn, args.served)
        shadow = "chroma" if args.served == "pgvector" else "pgvector"
        with LoadMonitor(markers=[bench_dir()]) as monitor:
            result = measure(settings, embedder, work.requests(60), args.clients, args.seconds)
    lines = summary(result, args.clients, args.seconds, args.served, shadow)
    markdown = "\n".join(["## Shadow reads under load", "", *lines, "", monitor.note()])
    print(markdown)
    write_section("shadow", markdown)


if __name__ == "__main__":
    main()
