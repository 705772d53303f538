"""Shadow reads of the collection's calls: with CANDLEFIRE_SHADOW_RATE > 0 each sampled call is
replayed by the shadow worker process on the store that does not serve and recorded beside the
reader's comparisons; the served answer never waits for it, never changes and never fails."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.app.shadow import judge
from candlefire_pipeline.operations.shadow.records import ShadowRecord, read_records
from candlefire_pipeline.operations.shadow.served import ShadowWorker
from candlefire_pipeline.settings import ShadowSettings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder

DRAIN_S = 600  # a generous bound on a busy machine; nothing here measures time
CALLS = [
    ("get", {"where": {"pmid": {"$in": ["10001", "10002", "10005"]}}}),
    ("get", {"where": {"chunk_index": 0}, "where_document": {"$contains": "SPG302"}, "limit": 1}),
    ("query", {"query_texts": ["SOD1 mice", "edaravone trial"], "n_results": 5}),
    ("query", {"query_texts": ["riluzole"], "where_document": {"$contains": "100%"}}),
]


@pytest.fixture
def shadowed(app_deployment):
    """The deployment with every call shadowed; no record before the test."""
    settings = replace(
        app_deployment.settings,
        model_id="hashing-v1:32",  # the worker's own query model (the replays embed nothing)
        shadow=ShadowSettings(rate=1.0, keep_text=True),
    )
    settings.shadow_pending_file.unlink(missing_ok=True)
    with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS shadow_comparisons")
    return settings


def test_each_call_is_replayed_on_the_other_store_and_recorded(shadowed):
    since = datetime.now(UTC) - timedelta(seconds=1)
    with ShadowWorker(shadowed) as worker:
        with ServingCollection(shadowed, SeededEmbedder(), shadow=worker) as collection:
            answers = [getattr(collection, kind)(**kwargs) for kind, kwargs in CALLS]
            assert collection.target.backend == "pgvector"
        assert worker.drain(DRAIN_S) and worker.stats.queued == len(CALLS)
    with ServingCollection(shadowed, SeededEmbedder()) as plain:  # no shadow: same answers
        assert [getattr(plain, kind)(**kwargs) for kind, kwargs in CALLS] == answers
    records, _ = read_records(shadowed.pg_dsn, shadowed.shadow_pending_file, since)
    assert len(records) == len(CALLS)
    for record in records:
        assert (record.served_store, record.shadow_store) == ("pgvector", "chroma")
        assert record.error is None and record.shadow_ms > 0
        assert record.overlap == 1.0 and record.grounding_equal and record.keyword_equal
    texts = {r.query_text for r in records}
    assert "SOD1 mice | edaravone trial" in texts and None in texts  # gets have no text


def test_a_closed_worker_drops_the_replay_and_the_answer_still_comes(shadowed):
    worker = ShadowWorker(shadowed, start=False)
    worker.close()
    with ServingCollection(shadowed, SeededEmbedder(), shadow=worker) as collection:
        assert collection.query(query_texts=["ALS"], n_results=3)["ids"][0]
    assert worker.stats.dropped_down == 1 and worker.stats.queued == 0


def record() -> ShadowRecord:
    return ShadowRecord("r", "2026-01-01T00:00:00+00:00", "h", "pgvector", "chroma", 1.0)


@pytest.mark.parametrize(
    ("served", "shadow", "overlap", "grounding", "identical"),
    [
        ([["a", "b"]], [["a", "b"]], 1.0, True, True),
        ([["a", "b"]], [["b", "a"]], 1.0, True, False),
        ([["a", "b"]], [["a", "c"]], 0.5, True, False),
        ([[]], [[]], 1.0, True, True),
        ([["a"]], [[]], 0.0, False, False),
        ([["a"], ["b", "c"]], [["a"], ["b"]], 0.75, True, False),
    ],
)
def test_a_comparison_is_judged_from_the_two_id_lists(served, shadow, overlap, grounding,
                                                      identical):  # fmt: skip
    judged = record()
    judge(judged, served, None, shadow, None)
    assert (judged.overlap, judged.grounding_equal, judged.keyword_equal) == (
        overlap, grounding, identical,
    )  # fmt: skip
    assert bool(judged.divergences) == (not identical)


def test_distances_beyond_the_tolerance_make_answers_differ():
    judged = record()
    judge(judged, [["a"]], [[0.5]], [["a"]], [[0.5 + 1e-3]])
    assert judged.overlap == 1.0 and not judged.keyword_equal
