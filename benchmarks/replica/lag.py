"""Replica lag during drops on the 62k workload, and what the app's reader serves meanwhile.

The run's own embedded primary holds the workload in pgvector (first-build path); a hot standby
is made from it (`EmbeddedReplica`: pg_basebackup -R behind a slot, timed and weighed) and the
app's collection (`open_collection`) reads it as the read-only role (CANDLEFIRE_PG_READ_DSN), the
switch promoted to pgvector. Two drops each replace `share` of the papers through the product's
replace_papers (one transaction) and record their WAL position in the switch: the first streams
as it goes; during the second the replica's replay is paused for `hold` seconds (a replica lagging
on purpose), then resumed. All along: the primary's view of the lag every 0.25 s, and the
reader's requests, each classed by the drop's marker text (previous state, new, torn, error).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from benchmarks.churn.revisions import Reviser
from benchmarks.churn.soak import fill
from benchmarks.common.data import bench_dir, embed_cached, scifact_records
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import latency_workload
from benchmarks.common.stores import scratch_dir
from benchmarks.replica.probe import Answer, AppReader, LagSampler
from benchmarks.replica.report import section
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.pg.replica import EmbeddedReplica
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.wal import replay_position
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.operations.serving.machine import AUTO_PROMOTE, Evidence, transition
from candlefire_pipeline.operations.serving.replication import note_applied_drop
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.settings.replica import ReplicaSettings

ROLE, TABLE, PREFIX = "candlefire_reader", "chunks", "candlefire-bench-replica-"
#: the benchmark promotes pgvector itself: the parity gates are another benchmark's subject
PASSING = Evidence("bench-replica", gates=(GateResult("every_gate", True, 1.0, 1.0, "bench"),))


@dataclass(frozen=True)
class Rig:
    """What a drop runs on: the primary's store, the corpus' reviser, the app's settings and
    collection (on the replica), the replica."""

    store: object
    reviser: Reviser
    model_id: str
    settings: Settings
    collection: object
    replica: EmbeddedReplica


@dataclass
class Phase:
    """One drop: its rows, apply seconds, when its commit was replayed, the lag and answers."""

    name: str
    rows: int
    apply_seconds: float
    committed_at: float  # seconds since the phase began
    replayed_at: float
    resumed_at: float | None
    samples: list[tuple[float, int, float]]
    answers: list[Answer]


def run(args, out) -> None:
    embedder = MemoEmbedder(embedder_for(Settings.from_env(), "query"))
    started, load = time.perf_counter(), LoadMonitor(markers=[PREFIX]).start()
    with scratch_dir(PREFIX) as root:
        result = measure(embedder, root, args)
    # the raw samples and answers, to read again without a new run
    (bench_dir() / "replica.json").write_text(json.dumps(result, default=vars))
    out.section("replica", section(result, args, load.stop().note(), time.perf_counter() - started))


def measure(embedder, root: Path, args) -> dict:
    """Build the primary and its replica, run both drops; the figures."""
    work = latency_workload(embedder, args.size)
    records = scifact_records()
    reviser = Reviser(work.corpus, records, embed_cached(embedder, [r["title"] for r in records]))
    primary = EmbeddedPostgres(root / "primary")
    replica = EmbeddedReplica(primary, root / "replica")
    try:
        rows = reviser.rows(embedder.model_id)
        store = fill(primary.dsn, TABLE, rows, embedder.model_id, embedder.dim)
        ensure_reader_role(primary.dsn, ROLE, table=TABLE)
        backup = made(replica)
        settings = serving(root, primary.dsn, replica)
        with open_collection(settings, embedder) as collection:
            rig = Rig(store, reviser, embedder.model_id, settings, collection, replica)
            phases = [drop(rig, number, paused, args) for number, paused in ((1, False), (2, True))]
        store.close()
    finally:
        replica.stop()
        primary.stop()
    return {"rows": rows.num_rows, "papers": len(reviser.pmids), "backup": backup,
            "phases": phases}  # fmt: skip


def made(replica: EmbeddedReplica) -> dict:
    """The replica's base backup: seconds (until it streams) and bytes on disk."""
    started = time.perf_counter()
    replica.create()
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in replica.data_dir.rglob("*") if p.is_file())
    return {"seconds": seconds, "bytes": size}


def serving(root: Path, primary_dsn: str, replica: EmbeddedReplica) -> Settings:
    """The app's settings: pgvector promoted on the primary, read on the replica as ROLE."""
    base = Settings.from_env().with_data_dir(root / "data")
    read_dsn = make_conninfo(replica.dsn, user=ROLE)
    settings = replace(base, pg_dsn=primary_dsn, pg_table=TABLE,
                       replica=ReplicaSettings(read_dsn=read_dsn, wait_seconds=600))  # fmt: skip
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    transition(settings, AUTO_PROMOTE, "replica benchmark", "benchmark", PASSING, dsn=primary_dsn)
    return settings


def drop(rig: Rig, number: int, paused: bool, args) -> Phase:
    """One drop with the sampler and the reader running; its Phase."""
    rows, pmids = rig.reviser.drop(number, args.share, rig.model_id)
    origin, primary_dsn = time.monotonic(), rig.settings.pg_dsn
    sampler = LagSampler(primary_dsn, origin)
    reader = AppReader(rig.collection, pmids[: args.sample], f"(revision {number})",
                       rig.reviser.papers[0]["title"], origin)  # fmt: skip
    sampler.start(), reader.start()
    time.sleep(1.0)  # a baseline before the drop
    if paused:
        rig.replica.pause_replay(True)
    started = time.perf_counter()
    rig.store.replace_papers(rows)
    apply_seconds = time.perf_counter() - started
    lsn = note_applied_drop(rig.settings, primary_dsn)
    committed_at, resumed_at = time.monotonic() - origin, None
    if paused:
        time.sleep(args.hold)
        resumed_at = time.monotonic() - origin
        rig.replica.pause_replay(False)
    replayed_at = wait_replayed(rig.replica.dsn, lsn) - origin
    time.sleep(1.0)  # the reader on the new state
    sampler.stop(), reader.stop()
    name = "paused replay" if paused else "streaming"
    return Phase(name, rows.num_rows, apply_seconds, committed_at, replayed_at, resumed_at,
                 sampler.samples, reader.answers)  # fmt: skip


def wait_replayed(dsn: str, lsn: str) -> float:
    """Poll the replica until it has replayed `lsn`; the monotonic time it had."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not replay_position(conn).has_replayed(lsn):
            time.sleep(0.02)
    return time.monotonic()
