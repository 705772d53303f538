"""What a rollback after retirement costs: `unretire` rebuilding a retired Chroma from the
ledger's batch files (no re-embedding), at 62,196 and 250,000 chunks.

Per size, in a throwaway data dir: the retrieval workload written as ~10 drops of batch files
(retirement/ledger.py) and applied to pgvector (apply_batch, as the pipeline does); then per
repeat, each measured operation a fresh process (retirement/child.py, its own peak RSS):

- first load: every drop applied to an empty Chroma (apply_batch): what the dual-write paid;
- unretire, folder deleted: Chroma retired after the drops before the last `--passed-over`
  ones, those passed over, the folder deleted (`retire --delete-files`): all rewritten;
- unretire, folder kept (the first size only): the same retirement, the folder as it was
  when Chroma retired: the passed-over drops written, every chunk read back for the check.

Each unretire is checked: it must end with Chroma a rollback target again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.common.data import bench_dir
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.scaled.corpus import stream_rows
from benchmarks.common.scaled.stores import folder_bytes
from benchmarks.common.stores import embedded_postgres, scratch_dir
from benchmarks.retirement.ledger import (
    drop_rows,
    forget_store,
    retire_chroma,
    write_batches,
)
from benchmarks.retirement.report import markdown
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

log = logging.getLogger(__name__)
FIRST_LOAD, DELETED, KEPT = "first load", "unretire, folder deleted", "unretire, folder kept"


@dataclass(frozen=True)
class Deployment:
    settings: Settings
    env: dict[str, str]
    keys: list[str]
    passed_over: list[str]


def deployment(root: Path, dsn: str, size: int) -> tuple[Settings, dict[str, str]]:
    """The settings of a throwaway deployment, and the environment that gives a command them."""
    table = f"unretire_{size}"
    settings = replace(Settings.from_env().with_data_dir(root / "data"), pg_dsn=dsn,
                       pg_table=table, chroma_host=None, stores=(CANDIDATE, REFERENCE),
                       serving_override=None)  # fmt: skip
    env = {key: value for key, value in os.environ.items()
           if key not in ("CANDLEFIRE_CHROMA_HOST", "CANDLEFIRE_SERVING_BACKEND",
                          "CANDLEFIRE_DROPS_DIR")}  # fmt: skip
    env.update({"CANDLEFIRE_DATA_DIR": str(settings.data_dir), "CANDLEFIRE_PG_DSN": dsn,
                "CANDLEFIRE_PG_TABLE": table, "CANDLEFIRE_STORES": f"{CANDIDATE},{REFERENCE}",
                "CANDLEFIRE_CHROMA_COLLECTION": settings.chroma_collection})  # fmt: skip
    return settings, env


def prepare(root: Path, dsn: str, embedder, size: int, args) -> tuple[Deployment, float]:
    """The drops' batch files, applied to pgvector; (the deployment, pgvector's apply seconds)."""
    if not 0 < args.passed_over < args.drops:
        raise ValueError(f"--passed-over {args.passed_over}: Chroma must have held some of the"
                         f" {args.drops} drops and passed over at least one")  # fmt: skip
    settings, env = deployment(root, dsn, size)
    keys = write_batches(stream_rows(embedder, size, drop_rows(size, args.drops)),
                         settings.batches_dir)  # fmt: skip
    started = time.perf_counter()
    with opened_backend(CANDIDATE, settings) as pg:
        pg.reset()
        for key in keys:
            apply_batch(pg, settings.batches_dir, key, embedder.model_id, embedder.dim)
    pg_seconds = time.perf_counter() - started
    log.info("%d chunks in %d drops applied to pgvector in %.1f s", size, len(keys), pg_seconds)
    return Deployment(settings, env, keys, keys[-args.passed_over :]), pg_seconds


def child(env: dict[str, str], *argv: str) -> dict:
    """One operation in a fresh process; its JSON, with the process's wall seconds."""
    command = [sys.executable, "-m", "benchmarks.retirement.child", *argv]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=6 * 3600,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:1])} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - started
    return result


def first_load(d: Deployment, embedder, template: Path | None) -> dict:
    """Every drop into an empty Chroma (in two processes: the drops Chroma held when it
    retired, kept as `template` when given, then the rest), timed as one load."""
    forget_store(d.settings.batches_dir, d.keys, REFERENCE)
    shutil.rmtree(d.settings.chroma_path, ignore_errors=True)
    model = ("--model", embedder.model_id, "--dim", str(embedder.dim))
    held = [k for k in d.keys if k not in d.passed_over]
    parts = [child(d.env, "first-load", *held, *model)]
    if template is not None and not template.exists():
        shutil.copytree(d.settings.chroma_path, template)
    parts.append(child(d.env, "first-load", *d.passed_over, *model))
    return {
        "seconds": sum(p["seconds"] for p in parts),
        "rows_written": sum(p["rows_written"] for p in parts),
        "peak_rss": max(p["peak_rss"] for p in parts),
        "process_seconds": sum(p["process_seconds"] for p in parts),
    }


def unretired(d: Deployment, folder: Path | None) -> dict:
    """Chroma retired (its folder `folder`'s copy, or deleted), then `unretire`, checked."""
    retire_chroma(d.settings, d.passed_over, folder)
    result = child(d.env, "unretire")
    if not result["changed"] or result["still_retired"]:
        raise RuntimeError(f"unretire did not make Chroma a rollback target: {result['message']}")
    return result


def measure_size(root: Path, dsn: str, embedder, size: int, args, kept: bool) -> dict:
    d, pg_seconds = prepare(root, dsn, embedder, size, args)
    template = root / "chroma-at-retirement" if kept else None
    repeats = args.repeats if size <= args.repeat_up_to else 1
    runs: dict[str, list[dict]] = {FIRST_LOAD: [], DELETED: [], **({KEPT: []} if kept else {})}
    folder = 0
    for repeat in range(repeats):  # the operations interleaved, so drift falls on each alike
        runs[FIRST_LOAD].append(first_load(d, embedder, template))
        folder = folder_bytes(d.settings.chroma_path)
        runs[DELETED].append(unretired(d, None))
        if kept:
            runs[KEPT].append(unretired(d, template))
        log.info("size %d, repeat %d: %s", size, repeat + 1,
                 {k: round(v[-1]["seconds"], 1) for k, v in runs.items()})  # fmt: skip
    with opened_backend(CANDIDATE, d.settings) as pg:
        pg.reset()  # the benchmark cluster keeps no copy of a throwaway table
    return {"size": size, "drops": len(d.keys), "passed_over": len(d.passed_over),
            "passed_over_rows": runs[KEPT][0]["rows_written"] if kept else None,
            "pg_apply_seconds": pg_seconds, "folder_bytes": folder, "repeats": repeats,
            "runs": runs}  # fmt: skip


def run(args, out) -> None:
    embedder = embedder_for(Settings.from_env(), "query")
    results = []
    with embedded_postgres() as dsn, LoadMonitor(markers=[bench_dir()]) as monitor:
        for i, size in enumerate(args.sizes):
            with scratch_dir(f"bench-unretire-{size}-") as root:
                results.append(measure_size(root, dsn, embedder, size, args, kept=i == 0))
    out.section("unretire", markdown(results, monitor.note()))
