"""The churn soak's loop: update drops into a pgvector table (and the exact oracle), measured
every few drops: final recall@15 vs the exact oracle, HNSW / GIN / heap bytes, dead tuples,
(auto)vacuums, retrieve() p50 / p95. Used by the churn benchmark (62k) and its test (small)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from benchmarks.common.requests import ExactAnnOracle, answer_all, final_recall, timed_answers
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.health import table_health, vacuum
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.retrieval.retriever import Retriever

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    drop: int
    recall: float
    p50_ms: float
    p95_ms: float
    hnsw_bytes: int
    gin_bytes: int
    heap_bytes: int
    live_tuples: int
    dead_tuples: int
    autovacuums: int
    vacuums: int
    drop_seconds: float  # mean seconds per drop since the previous checkpoint (0 at drop 0)
    stage_p95_ms: dict[str, float] = field(default_factory=dict)  # the store's stages
    waited_seconds: float = 0.0  # mean wait for autovacuum per drop (paced soak)
    #: the term cache: entries, how many differ from a fresh computation (0: exact), the mean
    #: recall of walked lists, and its upkeep's share of the drops' replace_papers time
    cache_entries: int = 0
    cache_differences: int = 0
    cache_walked_recall: float = 1.0
    upkeep_share: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


STAGES = ("semantic", "entities", "keyword", "grounding")


def exact_twin(store) -> PgVectorBackend:
    """The same table with no term cache and every keyword variant's holders ranked exactly:
    the oracle's substring side (its ANN side is the memory backend)."""
    return PgVectorBackend(
        store._dsn, table=store.names.table, substring_mode=store.substring_mode, ann=store.ann,
        cache=CacheParams(enabled=False, keyword_walk="off"),
    )  # fmt: skip


def measure(store, memory, embedder, requests, drop: int, drop_seconds: float) -> Checkpoint:
    """One checkpoint of the store against the exact oracle over the same content, and an
    audit of its term cache (every entry against a fresh computation)."""
    answers, seconds = timed_answers(Retriever(store, embedder), requests)
    stages = {s: metrics.p95([a.timings[s] for a in answers]) * 1e3 for s in STAGES if answers}
    exact = exact_twin(store)
    try:
        oracle = answer_all(Retriever(ExactAnnOracle(memory, exact), embedder), requests)
    finally:
        exact.close()
    cache = audit(store)
    store.conn.execute("SELECT pg_stat_force_next_flush()")
    health = table_health(store.conn, store.names.table)
    hnsw, gin = health.index("hnsw"), health.index("gin")
    point = Checkpoint(
        drop, final_recall(answers, oracle), metrics.p50(seconds) * 1e3,
        metrics.p95(seconds) * 1e3, hnsw.bytes, gin.bytes, health.heap_bytes,
        health.live_tuples, health.dead_tuples, health.autovacuum_count, health.vacuum_count,
        drop_seconds, stages, cache_entries=cache.checked,
        cache_differences=len(cache.differences), cache_walked_recall=cache.walked_recall,
    )  # fmt: skip
    for difference in cache.differences[:5]:
        log.error("term cache not exact at drop %d: %s", drop, difference)
    log.info("checkpoint %s", point)
    return point


def autovacuum_due(conn, table: str) -> bool:
    """Dead tuples past autovacuum's trigger (threshold + scale factor x reltuples)."""
    return conn.execute(DUE_SQL, [table]).fetchone()[0]


DUE_SQL = """
SELECT s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::int
       + current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0)
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relid = %s::regclass
"""


def await_autovacuum(conn, table: str, limit_s: float, poll_s: float = 2.0) -> float:
    """Wait (at most limit_s) while autovacuum is due on the table: the time between daily
    drops, in which the server's own autovacuum runs. Returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        if not autovacuum_due(conn, table):
            break
        time.sleep(poll_s)
    return time.perf_counter() - started


@dataclass
class SoakPlan:
    drops: int
    every: int
    share: float
    pace: bool = False  # wait for autovacuum after each drop (daily drops), else back to back
    pace_limit_s: float = 900.0
    vacuum: bool = False  # VACUUM (ANALYZE) after each drop (a test's stand-in for autovacuum)
    maintain_every: int = 0  # `candlefire maintain --apply` on pgvector every N drops (0: never)
    upkeep: bool = True  # the store asset's GIN check after each write (maintenance.gin_upkeep)


@dataclass
class SoakLog:
    """What happened between checkpoints: index bytes after every drop, maintenance actions."""

    sizes: list[tuple[int, int, int]] = field(default_factory=list)  # (drop, hnsw, gin) bytes
    actions: list[dict] = field(default_factory=list)


def maintain_store(store, number: int, log_: SoakLog) -> None:
    """What the weekly store_maintenance does to the pgvector table (operations/maintenance)."""
    from candlefire_pipeline.operations.maintenance import apply_action, pgvector_health

    for action in pgvector_health(store).actions:
        apply_action(store, action)
        log_.actions.append({"drop": number, **asdict(action)})


def upkeep_store(store, number: int, rows: int, log_: SoakLog) -> None:
    """What the pgvector store asset does after a write (operations/maintenance.gin_upkeep)."""
    from candlefire_pipeline.operations.maintenance import gin_upkeep

    for action in gin_upkeep(store, rows, store.count()).actions:
        log_.actions.append({"drop": number, "upkeep": True, **asdict(action)})


def run_soak(
    store, memory, reviser, embedder, requests, plan: SoakPlan,
    on_checkpoint: Callable[[Checkpoint], None] | None = None, soak_log: SoakLog | None = None,
) -> list[Checkpoint]:  # fmt: skip
    """`drops` update drops replacing `share` of the papers each; a checkpoint at 0 and every
    `every` drops (and after the last), each also passed to on_checkpoint as it is taken."""
    points = [measure(store, memory, embedder, requests, 0, 0.0)]
    if on_checkpoint:
        on_checkpoint(points[0])
    spent: list[float] = []
    waited: list[float] = []
    shares: list[float] = []
    for number in range(1, plan.drops + 1):
        rows, _ = reviser.drop(number, plan.share, embedder.model_id)
        started = time.perf_counter()
        store.replace_papers(rows)  # the product's path: DELETE + COPY, one transaction
        shares.append(store.last_upkeep.seconds / (time.perf_counter() - started))
        if plan.upkeep and soak_log is not None:
            upkeep_store(store, number, rows.num_rows, soak_log)
        spent.append(time.perf_counter() - started)
        memory.replace_papers(rows)
        if plan.vacuum:
            vacuum(store.conn, store.names.table)
        if plan.pace:
            store.conn.execute("SELECT pg_stat_force_next_flush()")
            waited.append(await_autovacuum(store.conn, store.names.table, plan.pace_limit_s))
        if soak_log is not None:
            if plan.maintain_every and number % plan.maintain_every == 0:
                maintain_store(store, number, soak_log)
            health = table_health(store.conn, store.names.table)
            soak_log.sizes.append((number, health.index("hnsw").bytes, health.index("gin").bytes))
        log.info("drop %d: %d rows in %.1f s", number, rows.num_rows, spent[-1])
        if number % plan.every == 0 or number == plan.drops:
            point = measure(store, memory, embedder, requests, number, metrics.mean(spent))
            point.waited_seconds = metrics.mean(waited) if waited else 0.0
            point.upkeep_share = metrics.mean(shares)
            points.append(point)
            spent, waited, shares = [], [], []
            if on_checkpoint:
                on_checkpoint(point)
    return points
