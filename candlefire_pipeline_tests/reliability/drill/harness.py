"""The crash drill: a drop's stages in a worker process, killed (SIGKILL) at random points,
each followed by what the schedule runs next and every check of checks.py.

A point: the stage's state is set up, the worker starts, the harness waits for the stage's
phase (a statement in pg_stat_activity, or the worker's `go`), waits a random delay more, notes
the statement running then (the point's place) and kills the server or the worker. Then the
server is started again (crash recovery), the killed worker's statements are let end, the same
step runs to completion in this process, and the checks run. Seeded: the seed is printed.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import psycopg
import pyarrow as pa
from psycopg import sql

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg.connect import CLIENT_CHECK_MS
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.operations.serving.machine import sync_history
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.reliability.drill import adopt, checks, kill, worker
from candlefire_pipeline_tests.reliability.drill.stages import SERVER, Stage, stages
from candlefire_pipeline_tests.reliability.drill.workload import Workload

TABLE, FIRST_BUILD_TABLE = "drill_chunks", "drill_fb"
WORKER_MODULE = "candlefire_pipeline_tests.reliability.drill.worker"


@dataclass
class KillPoint:
    number: int
    stage: str
    target: str
    delay_ms: int = 0
    #: where the kill landed: the worker's running statement(s), or between statements
    place: str = ""
    failures: list[str] = field(default_factory=list)
    #: what the checks saw: term-cache entries audited, HNSW recall against a scan
    figures: dict = field(default_factory=dict)

    @property
    def survived(self) -> bool:
        return not self.failures

    def line(self) -> str:
        outcome = "survived" if self.survived else "FAILED: " + "; ".join(self.failures)
        return (f"#{self.number} {self.stage} / kill {self.target} +{self.delay_ms} ms at "
                f"[{self.place}]: {outcome}")  # fmt: skip


class Drill:
    """One drill on `server`, its files under root, the workload loaded from `rows`."""

    def __init__(self, server: EmbeddedPostgres, root: Path, rows: pa.Table, seed: int,
                 share: float = 0.05, emit: Callable[[str], None] = print,
                 bulk_rows: int = 1_000, max_delays: dict[str, float] | None = None,
                 adopt_papers: int = 300) -> None:  # fmt: skip
        self.server, self.root, self.seed, self.share, self.emit = server, root, seed, share, emit
        self.bulk_rows = bulk_rows
        self.rng = random.Random(seed)
        self.batches = root / "batches"
        self.workload = Workload(rows, self.batches, seed)
        self.settings = Settings.from_env(parity=False).with_data_dir(root / "switch")
        self.stages = {name: replace(stage, max_delay_s=(max_delays or {}).get(name,
                                                                          stage.max_delay_s))
                       for name, stage in stages(TABLE, FIRST_BUILD_TABLE).items()}  # fmt: skip
        self.words = self.workload.sample_words(12)
        self.embedder = HashingEmbedder(dim=self.workload.dim)
        self.points: list[KillPoint] = []
        self.adopt_papers, self.app_rows = adopt_papers, None

    # set-up ----------------------------------------------------------------------------------
    def config(self, **extra) -> dict:
        base = {"dsn": self.server.dsn, "table": TABLE, "bulk_rows": self.bulk_rows,
                "batches": str(self.batches), "model": self.workload.model_id,
                "dim": self.workload.dim, "data_dir": str(self.settings.data_dir),
                "chroma": str(self.root / "chroma")}  # fmt: skip
        return {**base, **extra}

    def load(self) -> None:
        """The corpus as the first drop (a first build), Chroma rebuilt from it, a warm cache."""
        key = self.workload.first_batch()
        started = time.perf_counter()
        worker.drop_step(self.config(key=key))
        self.emit(f"first build of {self.workload.chunk_count()} chunks: "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        worker.unretire_step(self.config())
        self.warm()

    def warm(self) -> None:
        """Keyword, entity and grounding answers kept, so a drop has cache entries to upkeep."""
        store = worker.open_pg(self.config())
        try:
            vectors = self.embedder.embed(self.words)
            store.substring_candidates(self.words, vectors, 10)
            store.semantic_candidates(vectors[:6], 10, stage="entities", texts=self.words[:6])
            store.ground_terms([[w] for w in self.words])
            store.terms.flush()
        finally:
            store.close()

    def _prepare(self, stage: Stage, point: KillPoint) -> dict:
        """The state the stage starts from; the worker's configuration."""
        if stage.step == "switch":
            return self.config(point=point.number)
        if stage.step == "unretire":
            self._forget_in_chroma()
            return self.config()
        if stage.step == "adopt":
            return adopt.prepare(self._adopt_config())
        if stage.name == "hnsw":
            return self._first_build_config()
        self.warm()
        if stage.name == "phrase":  # as a first build leaves it: the step builds it again
            with psycopg.connect(self.server.dsn, autocommit=True) as conn:
                for index in phrase.all_index_names(Names(TABLE)):
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(index))
        return self.config(key=self.workload.next_drop(self.share))

    def _first_build_config(self) -> dict:
        """A table of its own, dropped, and a ledger holding the corpus's first drop only."""
        batches = self.root / "first-build"
        shutil.rmtree(batches, ignore_errors=True)
        source = self.batches / self.workload.keys[0]
        (batches / source.name).mkdir(parents=True)
        for part in source.glob("*.parquet"):
            (batches / source.name / part.name).hardlink_to(part)
        config = self.config(table=FIRST_BUILD_TABLE, batches=str(batches), key=source.name)
        store = worker.open_pg(config)
        store.reset()
        store.close()
        return config

    def _adopt_config(self) -> dict:
        """The app's collection (built once, its rows read once), a deployment to import into."""
        folder = self.root / "app-chroma"
        if self.app_rows is None:
            adopt.build_app_collection(folder, self.adopt_papers, self.seed)
            self.app_rows = adopt.app_side(folder, self.root / "app-copy")
        return self.config(table=adopt.TABLE, app_folder=str(folder),
                           adopt_data=str(self.root / "adopt"))  # fmt: skip

    def _forget_in_chroma(self) -> None:
        """Chroma lacking a share of the papers (and the drops since): what unretire writes."""
        chroma = build_backend("chroma", self.root / "chroma")
        try:
            held = sorted(chroma.paper_hashes())
            chroma.delete_papers(self.rng.sample(held, max(1, int(len(held) * self.share))))
        finally:
            chroma.close()

    # one point -------------------------------------------------------------------------------
    def run_point(self, stage: Stage, target: str) -> KillPoint | None:
        """Kill `target` in `stage` at a random point; None when the worker finished first."""
        point = KillPoint(len(self.points) + 1, stage.name, target)
        config = self._prepare(stage, point)
        log = (self.root / f"worker-{point.number}.log").open("w")  # its traceback, if killed
        proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, stage.step,
                                 json.dumps(config)], stdout=subprocess.PIPE, stderr=log,
                                text=True)  # fmt: skip
        try:
            if not self._aim(stage, proc, point):
                proc.wait()
                self._recover(stage, config, killed_worker=False)  # still a drop to finish
                return None
            self._kill(target, proc)
            if stage.step == "adopt":  # its files say where the import was
                point.place += adopt.left(config)
        finally:
            if proc.poll() is None:
                kill.kill_worker(proc)
            log.close()
        self._recover(stage, config, killed_worker=target != SERVER)
        self._check(stage, config, point)
        self.points.append(point)
        self.emit(point.line())
        return point

    def _aim(self, stage: Stage, proc: subprocess.Popen, point: KillPoint) -> bool:
        """Wait for the phase, then the random delay; note the place. False: the worker ended."""
        if proc.stdout.readline().strip() != "go":
            return False
        with psycopg.connect(self.server.dsn, autocommit=True) as watcher:
            for like in (stage.phase.after_like, stage.phase.query_like):
                if like is not None and not self._seen(watcher, like, proc):
                    return False
            delay = self.rng.uniform(0, stage.max_delay_s)
            time.sleep(delay)
            if proc.poll() is not None:
                return False
            point.delay_ms = round(delay * 1000)
            point.place = kill.running_statement(watcher)
            if stage.phase.query_like is None:  # timed from `go`: name the phase too
                point.place = f"{stage.phase.name}; Postgres: {point.place}"
        return True

    def _seen(self, watcher: psycopg.Connection, like: str, proc: subprocess.Popen) -> bool:
        """Until a statement matching `like` runs; False when the worker ended first."""
        deadline = time.monotonic() + kill.PHASE_LIMIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            if kill.active_statement(watcher, like):
                return True
            time.sleep(0.005)
        return False

    def _kill(self, target: str, proc: subprocess.Popen) -> None:
        if target == SERVER:
            kill.kill_server(self.server)
            proc.wait(kill.PHASE_LIMIT_S)  # its connection is gone: it fails and exits
        else:
            kill.kill_worker(proc)

    def _recover(self, stage: Stage, config: dict, killed_worker: bool) -> None:
        """The server up again (crash recovery), then the same step, as the next run would.

        After a worker's kill the next run starts once the interval in which the product
        promises the orphan's statements end (backends/pg/connect.py) has passed, not later."""
        dsn = self.server.dsn
        if killed_worker:
            self._orphans_end(dsn, time.monotonic() + 2 * CLIENT_CHECK_MS / 1000)
        if stage.step == "switch":
            sync_history(self.settings, dsn)  # what the next transition or status does first
        else:
            worker.STEPS[stage.step](config)

    def _orphans_end(self, dsn: str, deadline: float) -> None:
        """Until no other session runs a statement, or the deadline: no longer."""
        with psycopg.connect(dsn, autocommit=True) as watcher:
            while kill.running_statement(watcher) != "between statements":
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)

    def _check(self, stage: Stage, config: dict, point: KillPoint) -> None:
        if stage.step == "adopt":
            rng = np.random.default_rng(point.number)
            point.failures, point.figures = adopt.adopt_failures(config, self.app_rows, rng)
            return
        if stage.step == "switch":
            point.failures += checks.switch_failures(self.settings, self.server.dsn)
            return
        if stage.step == "unretire":
            chroma = build_backend("chroma", Path(config["chroma"]))
            try:
                point.failures += checks.chroma_failures(chroma, self.batches)
            finally:
                chroma.close()
            return
        store = worker.open_pg(config)
        try:
            point.failures += checks.ledger_failures(store, Path(config["batches"]))
            failures, audited = checks.term_cache_failures(store)
            point.failures += failures + checks.index_failures(store)
            ann, recall = checks.ann_failures(store, np.random.default_rng(point.number))
            point.failures += ann + checks.trigram_failures(store, self.words[:4])
            point.figures = {"audited": audited, "recall": round(recall, 3)}
        finally:
            store.close()

    # the schedule ----------------------------------------------------------------------------
    def schedule(self, per_stage: dict[str, int]) -> list[tuple[Stage, str]]:
        """`per_stage[name]` points of each stage, targets alternating, in a seeded order."""
        plan = []
        for name, count in per_stage.items():
            stage, first = self.stages[name], self.rng.randrange(2)
            targets = stage.targets
            plan += [(stage, targets[(first + i) % len(targets)]) for i in range(count)]
        self.rng.shuffle(plan)
        return plan

    def run(self, per_stage: dict[str, int], max_misses: int = 20) -> list[KillPoint]:
        """Every scheduled point; a point whose worker finished first is tried again."""
        self.emit(f"crash drill: seed {self.seed}")
        misses = 0
        for stage, target in self.schedule(per_stage):
            while self.run_point(stage, target) is None:
                misses += 1
                self.emit(f"{stage.name}: the worker finished before the kill; again")
                if misses > max_misses:
                    raise AssertionError(f"{misses} points missed: the phases are too short")
        return self.points


def summary(points: list[KillPoint]) -> str:
    survived = sum(p.survived for p in points)
    return f"kill points: {survived} survived of {len(points)} tried"
