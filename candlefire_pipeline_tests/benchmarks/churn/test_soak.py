"""The churn soak, short: update drops through the product's replace_papers on a real pgvector
table, checkpoints against the exact oracle (the 62k run: `python -m benchmarks churn`)."""

from __future__ import annotations

import time

import pyarrow.compute as pc
import pytest

from benchmarks.churn.loop import SoakPlan, run_soak
from benchmarks.churn.report import partial_section, section
from benchmarks.churn.revisions import Reviser
from benchmarks.common.data import embed_cached, scifact_records
from benchmarks.common.requests import latency_workload
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.memo import MemoEmbedder

SIZE, DROPS, EVERY, SHARE = 1_500, 4, 2, 0.2


@pytest.fixture
def workload(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path / "bench"))
    embedder = MemoEmbedder(load_embedder("hashing-v1"))
    work = latency_workload(embedder, SIZE)
    records = scifact_records()
    base = embed_cached(embedder, [r["title"] for r in records])
    return embedder, work, Reviser(work.corpus, records, base)


def test_drops_replace_the_share_of_papers_asked(workload):
    embedder, work, reviser = workload
    before = {c["pmid"]: c["paper_hash"] for c in reviser.chunks}
    rows, pmids = reviser.drop(1, SHARE, embedder.model_id)
    after = {c["pmid"]: c["paper_hash"] for c in reviser.chunks}
    assert len(pmids) == round(SHARE * len(before))
    assert {p for p in before if before[p] != after[p]} == set(pmids)
    assert set(pc.unique(rows["pmid"]).to_pylist()) == set(pmids)
    assert reviser.rows(embedder.model_id).num_rows == work.rows.num_rows  # same shape


def test_a_short_soak_keeps_the_store_exact_and_measures_every_checkpoint(workload, make_backend):
    embedder, work, reviser = workload
    store = make_backend("pgvector", bulk_rebuild_rows=500)
    memory = build_backend("memory")
    for target in (store, memory):
        target.replace_papers(reviser.rows(embedder.model_id))
    requests = work.requests(10)
    plan = SoakPlan(DROPS, EVERY, SHARE, vacuum=True)  # VACUUM stands in for autovacuum's pace
    points = run_soak(store, memory, reviser, embedder, requests, plan)
    assert [p.drop for p in points] == [0, 2, 4]
    assert store.chunk_hashes() == memory.chunk_hashes()  # every drop landed exactly
    for point in points:
        assert point.recall >= 0.99, point  # 1,500 chunks: the graph search is all but exact
        assert point.live_tuples > 0 and point.hnsw_bytes > 0 and point.gin_bytes > 0
        assert set(point.stage_p95_ms) == {"semantic", "entities", "keyword", "grounding"}
    assert points[-1].vacuums >= DROPS
    assert points[-1].hnsw_bytes > points[0].hnsw_bytes  # the graph grew with the churn


def test_the_section_states_each_goal(workload):
    embedder, work, reviser = workload
    point = dict(
        recall=0.995, p50_ms=10.0, p95_ms=12.0, hnsw_bytes=100, gin_bytes=100, heap_bytes=1,
        live_tuples=1, dead_tuples=0, autovacuums=0, vacuums=0, drop_seconds=0.0,
    )  # fmt: skip
    from benchmarks.churn.loop import Checkpoint

    points = [Checkpoint(0, **point), Checkpoint(10, **{**point, "hnsw_bytes": 200})]
    fresh = Checkpoint(10, **{**point, "p95_ms": 10.0})
    result = {
        "points": points, "final": {"churned": [points[1]], "fresh": [fresh]}, "rows": 1,
        "papers": 1, "facts": {"versions": "Postgres 18.6, pgvector 0.8.6"},
    }  # fmt: skip

    class Args:
        drops, every, share, requests, pace = 10, 10, 0.2, 5, True

    text = section(result, Args, "load", 60.0)
    assert "lowest **0.9950** (drop 0): met" in text
    assert "largest **1.50x** (drop 10; HNSW 2.00x, GIN 1.00x): met" in text
    assert "= **1.20x** (met)" in text
    partial = partial_section({**result, "final": None}, Args, "load", 60.0)
    assert "**In progress: 10 of 10 drops done**" in partial and "| 10 | 0.9950 |" in partial


def test_the_soak_table_runs_the_products_efforts(workload, pg_dsn):
    from benchmarks.churn.soak import fill
    from candlefire_pipeline.backends.factory import pg_ann_params
    from candlefire_pipeline.settings import Settings

    embedder, _, reviser = workload
    store = fill(pg_dsn, "churn_fill", reviser.rows(embedder.model_id), embedder.model_id,
                 embedder.dim)  # fmt: skip
    try:
        assert store.ann == pg_ann_params(Settings.from_env())
        assert store.count() == reviser.rows(embedder.model_id).num_rows
    finally:
        store.reset()
        store.close()


def test_pacing_sets_the_stand_ins_and_puts_the_defaults_back(pg_dsn):
    from benchmarks.churn.soak import PACED_SETTINGS, pace_autovacuum
    from candlefire_pipeline.backends.factory import build_backend

    store = build_backend("pgvector", pg_dsn, table="churn_pacing")

    def shown() -> dict:
        return {n: store.conn.execute(f"SHOW {n}").fetchone()[0] for n in PACED_SETTINGS}

    def settled(wanted: dict) -> dict:
        """pg_reload_conf() only signals: a backend applies the file at a later command, once
        the postmaster has read it (a busy machine may take a while; a bound, not a timing)."""
        deadline = time.monotonic() + 120
        while (now := shown()) != wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        return now

    defaults = {"autovacuum_naptime": "1min", "autovacuum_vacuum_cost_delay": "2ms"}
    try:
        assert shown() == defaults
        pace_autovacuum(store, True)
        assert settled(PACED_SETTINGS) == PACED_SETTINGS
        pace_autovacuum(store, False)
        assert settled(defaults) == defaults
    finally:
        pace_autovacuum(store, False)
        store.close()
