"""Per size, in a throwaway data dir with its own embedded server: the workload written as
drops of batch files (retirement/ledger.py) and applied to pgvector, WAL archiving enabled,
`backup take` after all but the last `--after` drops, those applied, then the server SIGKILLed
and data/pg deleted, and `restore` (replay to the end of the archive, the ledger re-applied,
every check) timed by its parts. The restored store is compared with the ledger, chunk by
chunk."""

from __future__ import annotations

import itertools
import logging
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.backup.report import markdown
from benchmarks.common.data import bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.corpus import stream_rows
from benchmarks.common.stores import scratch_dir
from benchmarks.retirement.ledger import drop_rows, write_batches
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.backup import commands
from candlefire_pipeline.operations.backup.archive import wal_dir
from candlefire_pipeline.operations.backup.tools import tree_bytes
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

log = logging.getLogger(__name__)


def deployment(root: Path, size: int) -> Settings:
    """A throwaway deployment on its own embedded server (no DSN: the embedded one)."""
    return replace(Settings.from_env().with_data_dir(root / "data"), pg_dsn=None,
                   pg_table=f"backup_{size}", chroma_host=None, stores=(CANDIDATE, REFERENCE),
                   serving_override=None)  # fmt: skip


def apply(settings: Settings, keys: list[str], embedder) -> float:
    started = time.perf_counter()
    with opened_backend(CANDIDATE, settings) as pg:
        for key in keys:
            apply_batch(pg, settings.batches_dir, key, embedder.model_id, embedder.dim)
    return time.perf_counter() - started


#: Keyword reads made before the backup: their term cache entries must come out of the restore
#: equal to a fresh computation (the restore's audit).
KEPT_TERMS = ("protein", "cells", "mutation", "patients", "expression", "receptor")


def keep_terms(settings: Settings, embedder) -> None:
    with opened_backend(CANDIDATE, settings) as pg:
        pg.substring_candidates(list(KEPT_TERMS), embedder.embed(list(KEPT_TERMS)), 15)


def first_merged(slices: Iterator[pa.Table], count: int) -> Iterator[pa.Table]:
    """The first `count` slices as one table, then the rest as they come."""
    yield pa.concat_tables(itertools.islice(slices, count))
    yield from slices


def lose_data_dir(settings: Settings) -> None:
    """Every server process SIGKILLed at once, then data/pg deleted (the disk died)."""
    server = EmbeddedPostgres(settings.pg_data_dir)
    server.dsn  # noqa: B018 - the running server's handle, for its pid
    postmaster = psutil.Process(server.pid)
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes:
        process.send_signal(signal.SIGKILL)
    psutil.wait_procs(processes, timeout=60)
    server.stop()
    shutil.rmtree(settings.pg_data_dir)


def measure_size(root: Path, embedder, size: int, args) -> dict:
    settings = deployment(root, size)
    slices = stream_rows(embedder, size, drop_rows(size, args.drops))
    keys = write_batches(first_merged(slices, args.first_drops), settings.batches_dir)
    before, after = keys[: -args.after], keys[-args.after :]
    folder = commands.default_backup_dir(settings)
    commands.enable_archiving(settings, folder)
    applied = apply(settings, before, embedder)
    keep_terms(settings, embedder)
    manifest = commands.take_backup(settings, folder)
    apply(settings, after, embedder)
    lose_data_dir(settings)
    result = commands.restore(settings, folder)
    with opened_backend(CANDIDATE, settings) as pg:
        if pg.chunk_hashes() != expected_chunks(settings.batches_dir):
            raise RuntimeError("the restored store differs from the ledger")
    repaired = result.reconciled.repaired["default"]
    EmbeddedPostgres(settings.pg_data_dir).stop()
    return {
        "size": size, "drops": len(keys), "after": len(after), "apply_seconds": applied,
        "first_rows": pq.read_metadata(settings.batch_dir(keys[0]) / "chunks.parquet").num_rows,
        "backup_seconds": manifest.seconds, "backup_bytes": manifest.bytes,
        "backup_chunks": sum(manifest.chunks.values()), "wal_bytes": tree_bytes(wal_dir(folder)),
        "restore_seconds": result.total_seconds, "replay_seconds": result.replay_seconds,
        "found": repaired.plan.counts, "rows_written": repaired.rows_written,
        "checks": result.reconciled.checks.summary(),
    }  # fmt: skip


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    results = []
    with LoadMonitor(markers=[bench_dir()]) as monitor:
        for size in args.sizes:
            with scratch_dir(f"bench-backup-{size}-") as root:
                try:
                    results.append(measure_size(root, embedder, size, args))
                finally:
                    EmbeddedPostgres(root / "data" / "pg").stop()
                log.info("size %d: %s", size, results[-1] if results else "failed")
    out.section("backup", markdown(results, monitor.note(), embedder.model_id))
