"""Shadow reads through the app-facing reader on real Postgres and Chroma: live requests are
replayed on the store that does not serve, compared and recorded; the served answer never
waits for them, never changes and never fails because of them."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from candlefire_pipeline.operations.pending_rows import pending_entries
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.commands import Order, promote
from candlefire_pipeline.operations.shadow import served as shadow_module
from candlefire_pipeline.operations.shadow.records import query_hash, read_records
from candlefire_pipeline.operations.shadow.served import ShadowTarget, ShadowWorker, shadow_targets
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.shadow.gates import shadow_gates
from candlefire_pipeline.parity.shadow.window import aggregate
from candlefire_pipeline.retrieval.citations import Citations
from candlefire_pipeline.retrieval.query_plan import QueryPlan
from candlefire_pipeline.retrieval.retriever import Retrieval
from candlefire_pipeline.settings import ParityThresholds, ShadowSettings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import demo_deployment
from candlefire_pipeline_tests.fixtures_backends import fresh_database

QUERIES = load_queries()[:12]
DRAIN_S = 600  # a generous bound on a busy machine; the tests never measure time


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, pg_dsn):
    """The first demo drop in every store (its own database, so the shadow table starts empty)."""
    monkeypatch = pytest.MonkeyPatch()
    with fresh_database(pg_dsn) as dsn:
        yield demo_deployment(monkeypatch, tmp_path_factory.mktemp("shadow"), dsn)
        monkeypatch.undo()


@pytest.fixture
def settings(deployment):
    """A never-promoted switch and no shadow record before each test."""
    settings, _ = deployment
    for path in (settings.serving_file, settings.shadow_pending_file):
        path.unlink(missing_ok=True)
    with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS shadow_comparisons")
    return settings


def shadowing(settings, **fields):
    return replace(settings, shadow=ShadowSettings(**{"rate": 1.0, **fields}))


def ask(reader) -> list[list[str]]:
    return [reader.retrieve(q.text, q.entities, q.terms).pmids for q in QUERIES]


def unshadowed(reader) -> list[list[str]]:
    """The same reader's Retriever asked directly, with no shadow offer. On the same open store:
    two opens of a Chroma collection may differ in the tail of the semantic pool (approximate
    search), one open answers the same query the same way."""
    retriever = reader.retriever()
    return [retriever.retrieve(q.text, q.entities, q.terms).pmids for q in QUERIES]


def records(settings):
    found, why = read_records(settings.pg_dsn, settings.shadow_pending_file,
                              datetime.now(UTC) - timedelta(hours=1))  # fmt: skip
    assert why is None
    return found


def test_the_targets_are_the_fed_stores_that_do_not_serve(settings):
    assert shadow_targets(settings, "chroma") == [ShadowTarget("pgvector", "pgvector")]
    assert shadow_targets(settings, "pgvector") == [ShadowTarget("chroma", "chroma")]
    served_by_qdrant_server = replace(settings, qdrant_url="http://qdrant.internal:6333")
    assert [t.name for t in shadow_targets(served_by_qdrant_server, "pgvector")] == [
        "chroma", "qdrant",
    ]  # fmt: skip


def test_live_requests_are_replayed_compared_and_recorded(settings, deployment):
    shadowed = shadowing(settings)
    with (
        ShadowWorker(shadowed) as worker,
        ServingReader(shadowed, deployment[1], shadow=worker) as r,
    ):
        assert ask(r) == unshadowed(r)  # the served answers are exactly the unshadowed ones
        assert worker.drain(DRAIN_S)
        pid = worker._link.process.pid
        # the worker yields the CPU to everyone (SCHED_IDLE, or nice 19 where unavailable)
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE or os.getpriority(0, pid) == 19
    stats = worker.stats
    n = len(QUERIES)
    assert (stats.offered, stats.sampled, stats.queued, stats.done, stats.recorded) == (n,) * 5
    assert stats.dropped_full == stats.lost == 0 and stats.coverage == 1.0
    found = records(settings)  # closing the worker flushed them into Postgres
    assert pending_entries(settings.shadow_pending_file) == []
    assert len(found) == n and {(r.served_store, r.shadow_store) for r in found} == {
        ("chroma", "pgvector"),
    }  # fmt: skip
    assert {r.query_hash for r in found} == {query_hash(q.text, q.entities, q.terms)
                                            for q in QUERIES}  # fmt: skip
    assert all(r.error is None and r.shadow_ms > 0 and r.served_ms > 0 for r in found)
    # the stores hold the same chunks: their answers agree (as in the parity report)
    window = aggregate(found, datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC), 60)
    pair = window.target("chroma", "pgvector")
    assert pair.mean_overlap >= 0.9 and pair.grounding_agreement == 1.0
    # no text kept by default: neither the query nor its terms, anywhere in the records
    assert all(r.query_text is None and r.entities is None and r.terms is None for r in found)
    divergences = [d for r in found for d in r.divergences]
    assert all("term" not in d and "detail" not in d for d in divergences)


def test_after_the_flip_pgvector_serves_and_chroma_is_the_shadow(settings, deployment):
    promoted = promote(settings, Order("promote", "shadow test", "tester"))
    assert promoted.decision.outcome == "changed"
    shadowed = shadowing(settings, keep_text=True)
    with (
        ShadowWorker(shadowed) as worker,
        ServingReader(shadowed, deployment[1], shadow=worker) as reader,
    ):
        ask(reader)
        assert worker.drain(DRAIN_S)
    found = records(settings)
    assert {(r.served_store, r.shadow_store) for r in found} == {("pgvector", "chroma")}
    by_hash = {r.query_hash: r for r in found}
    first = by_hash[query_hash(QUERIES[0].text, QUERIES[0].entities, QUERIES[0].terms)]
    assert (first.query_text, first.entities, first.terms) == (
        QUERIES[0].text, list(QUERIES[0].entities), list(QUERIES[0].terms),
    )  # fmt: skip


def test_a_full_queue_drops_the_replay_and_counts_it(settings, deployment):
    shadowed = shadowing(settings, queue_size=2)
    worker = ShadowWorker(shadowed, start=False)  # nothing takes jobs off the queue
    with ServingReader(shadowed, deployment[1], shadow=worker) as reader:
        assert ask(reader) == unshadowed(reader)
    stats = worker.stats
    assert (stats.sampled, stats.queued, stats.dropped_full) == (12, 2, 10)
    assert stats.done == 0 and stats.coverage == 0.0


def test_rate_zero_shadows_nothing_and_starts_no_worker(settings, deployment):
    with ServingReader(settings, deployment[1]) as reader:
        ask(reader)
        assert reader.shadow is None
    assert records(settings) == []


def test_a_failing_shadow_store_never_touches_the_served_answer(settings, deployment):
    dead = f"postgresql://cf:secret@127.0.0.1:{procs.free_port()}/x"
    # the worker's pgvector is unreachable (and so is its Postgres for the records)
    broken = shadowing(replace(settings, pg_dsn=dead))
    with (
        ShadowWorker(broken) as worker,
        ServingReader(settings, deployment[1], shadow=worker) as reader,
    ):
        assert ask(reader) == unshadowed(reader)
        assert worker.drain(DRAIN_S)
    kept = pending_entries(settings.shadow_pending_file)  # Postgres down: kept locally
    assert len(kept) == len(QUERIES)
    assert all(e["error"] and e["overlap"] is None for e in kept)
    assert all("secret" not in e["error"] for e in kept)
    assert "BackendUnavailableError" in kept[0]["error"]
    # the window says so: every read failed, the error gate fails
    window = aggregate(records(settings), datetime.now(UTC) - timedelta(hours=1),
                       datetime.now(UTC), 60)  # fmt: skip
    gates = {g.name: g for g in shadow_gates(window, ParityThresholds(min_queries_with_results=5),
                                             "chroma", "pgvector")}  # fmt: skip
    assert not gates["shadow_errors"].passed and gates["shadow_errors"].value == 1.0


def test_a_dead_worker_is_started_again(settings, deployment, monkeypatch):
    monkeypatch.setattr(shadow_module, "RESTART_EVERY_S", 0.0)
    shadowed = shadowing(settings)
    with (
        ShadowWorker(shadowed) as worker,
        ServingReader(shadowed, deployment[1], shadow=worker) as reader,
    ):
        query = QUERIES[0]
        reader.retrieve(query.text, query.entities, query.terms)
        assert worker.drain(DRAIN_S)
        worker._link.process.kill()
        worker._link.process.wait()
        for query in QUERIES[1:3]:
            reader.retrieve(query.text, query.entities, query.terms)
        assert worker.drain(DRAIN_S)
    assert worker.stats.restarts == 1 and worker.stats.done + worker.stats.lost == 3


def test_offer_never_raises(settings):
    worker = ShadowWorker(shadowing(settings), start=False)
    assert worker.offer("chroma", "q", (), (), None, 0.1) is False  # not a Retrieval
    assert worker.stats.errors == 1 and worker.stats.offered == 1


def test_the_feeder_outlives_a_job_it_cannot_send(settings, deployment):
    shadowed = shadowing(settings)
    unsendable = Retrieval(
        results=[{"pmid": "1"}], grounding={"t": {"corpus": lambda: 1}}, semantic=[],
        entities=[], keyword=[], fused=[], plan=QueryPlan.build("q"),
        citations=Citations([], (), (), (), False),
    )  # fmt: skip
    with (
        ShadowWorker(shadowed) as worker,
        ServingReader(shadowed, deployment[1], shadow=worker) as reader,
    ):
        assert worker.offer("chroma", "q", (), (), unsendable, 0.1)  # queued; cannot be pickled
        query = QUERIES[0]
        reader.retrieve(query.text, query.entities, query.terms)
        assert worker.drain(DRAIN_S)
    assert (worker.stats.lost, worker.stats.done) == (1, 1)
