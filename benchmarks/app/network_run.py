"""The app benchmark's network part (`--parts network`): the app-network section at the first
size. The arms at each RTT (network.py), app threads at each RTT (network_threads.py), the
staleness window (staleness.py), then the install (install.py), outside the timed parts."""

from __future__ import annotations

import logging

from benchmarks.app import install, network, network_threads, staleness
from benchmarks.app.network_report import markdown
from benchmarks.app.unseen import unseen
from benchmarks.common.data import bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.stores import chroma_path, load_chroma
from benchmarks.common.scaled.tables import table_name
from benchmarks.common.stores import sized_label
from benchmarks.scale.workloads import Workloads
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
#: Rounds of the threads, the RTTs alternating.
THREAD_ROUNDS = 2


def measure(settings: Settings, embedder, dsn: str, corpus, sets: Workloads, args) -> dict:
    """Every figure of the section, and the machine load's note over the timed parts."""
    size, rtts = corpus.size, args.rtts
    chroma = None
    if 0.0 in rtts:
        load_chroma(corpus)
        chroma = (chroma_path(size), table_name(size))
    label = sized_label("app_staleness", size, None)
    paper = staleness.small_table(dsn, corpus, label)
    result = {"size": size, "requests": len(sets.assistant), "rounds": THREAD_ROUNDS,
              "staleness_ms": settings.app_client.staleness_ms, "commits": args.commits,
              "pool_size": settings.app_client.pool_size}  # fmt: skip
    with (LoadMonitor(markers=[bench_dir()]) as monitor,
          network.across(settings, embedder, dsn, chroma) as net):  # fmt: skip
        network.warm(net, [*sets.pool_pass, *sets.assistant])
        rows = []
        for rtt in rtts:
            new = unseen(sets.assistant, f"{rtt:g} ms")
            rows.append(network.measure_row(net, rtt, network.NEW, new))
            rows.append(network.measure_row(net, rtt, network.REPEATED, sets.assistant))
            log.info("network %g ms done", rtt)
        result["rows"] = rows
        if args.threads:
            result["threads"] = network_threads.throughput(
                net, rtts, sets.assistant, args.threads, THREAD_ROUNDS
            )
        result["staleness"] = staleness.measure(net, embedder, label, paper, rtts, args.commits)
    result["note"] = monitor.note()
    result["install"] = install.measure() if args.install else None
    return result


def section(result: dict) -> str:
    return markdown(result, result["note"])
