"""The demo's story lines and summary, from materialization metadata (pure formatting)."""

from types import SimpleNamespace

import pytest
from dagster._core.events import DagsterEventType

from candlefire_pipeline.defs.demo_launch import LONG_STEP_S, progress_messages
from candlefire_pipeline.defs.progress import PROGRESS_PREFIX
from candlefire_pipeline.demo_story import ServingSummary, step_lines, summary_lines
from candlefire_pipeline.operations.serving.machine import PINNED, ServingState
from candlefire_pipeline.parity.gates import GateResult

STORE = {
    "rows_written": 23, "papers_replaced": 8, "papers_unchanged": 1, "papers_deleted": 1,
    "chunks_deleted": 2, "store_chunks": 651,
}  # fmt: skip
INGEST = {
    "papers": {"records_in": 9, "accepted": 8, "rejected": 1, "deleted_pmids": 1},
    "chunks": {"chunks": 23, "papers": 8, "full_text_papers": 3},
    "embeddings": {
        "chunks": 23, "embedded": 20, "cached": 3, "model_id": "sentence-transformers/x-v2",
        "dim": 384, "chunks_per_second": 41.6,
    },
    "pgvector_chunks": STORE,
    "chroma_chunks": STORE,
    "shadow_parity": {"window_id": "w1", "samples": 0, "failed_gates": "none"},
}  # fmt: skip


@pytest.mark.parametrize(
    ("asset", "expected"),
    [
        ("papers", "papers      9 records in -> 8 accepted, 1 rejected, 1 deletions"),
        ("chunks", "chunks      23 chunks from 8 papers (3 full text)"),
        ("embeddings", "embeddings  23 chunks: 20 embedded, 3 cached (x-v2, 384-dim, 42 chunks/s)"),
        (
            "pgvector_chunks",
            "pgvector    +23 rows -2 chunks (8 papers replaced, 1 unchanged, 1 deleted)"
            " = 651 chunks",
        ),
        ("shadow_parity", "shadow      window w1: 0 live comparisons"),
    ],
)
def test_one_line_per_step_from_its_metadata(asset, expected):
    assert step_lines({asset: INGEST[asset]}, {}) == [f"    {expected}"]


def test_steps_come_in_dag_order_then_the_checks():
    lines = step_lines(dict(reversed(INGEST.items())), {"a": True, "b": False, "c": True})
    labels = [line.split()[0] for line in lines]
    assert labels == ["papers", "chunks", "embeddings", "pgvector", "chroma", "shadow", "checks"]
    assert lines[-1] == "    checks      2/3 FAILED: b"


def test_a_run_that_materialized_nothing_tells_nothing():
    assert step_lines({}, {}) == []


def _summary(gates) -> list[str]:
    state = ServingState(
        state=PINNED, changed_at="2026-11-30T10:00:00Z", reason="drill", actor="bob"
    )
    return summary_lines({"pgvector": 651, "chroma": None}, ServingSummary("r1", gates, state))


def test_the_summary_has_chunks_per_store_every_gate_the_serving_state_and_what_next():
    gates = [
        GateResult("mean_overlap", False, 0.85, 0.9, ""),
        GateResult("report_is_fresh", True, 0.0, 0.0, ""),
        GateResult("stores_hold_current_versions", True, 0.0, 0.0, ""),  # the widest name
        GateResult("pgvector_version", True, 0.0, 0.0, "", "0.8.6", ">= 0.8.4"),
        GateResult("candlefire_conformance", True, 0.0, 0.0, "", "3300 / 3300", "all"),
        GateResult("shadow_agreement", True, 0.0, 20.0, "", "0 compared", "not required"),
    ]
    lines = _summary(gates)
    text = "\n".join(lines)
    assert "  pgvector                          651" in text
    assert "  chroma                              -" in text  # never materialized
    header = lines.index(next(line for line in lines if line.lstrip().startswith("gate ")))
    assert lines[header : header + 7] == [
        "  gate                                  value  threshold     result",
        "  mean_overlap                           0.85  >= 0.9        FAIL",
        "  report_is_fresh                           0  = 0           pass",
        "  stores_hold_current_versions              0  = 0           pass",
        "  pgvector_version                      0.8.6  >= 0.8.4      pass",
        "  candlefire_conformance          3300 / 3300  all           pass",
        "  shadow_agreement                 0 compared  not required  pass",
    ]
    assert "serving backend: chroma (PINNED by bob at 2026-11-30T10:00:00Z: drill)" in text
    assert "make ui" in text and "candlefire query" in text and "candlefire status" in text


def test_the_summary_of_an_instance_without_a_report_says_so():
    assert "  gates: no parity report yet" in _summary([])


def _record(step, kind=None, message="", at=0.0):
    entry = SimpleNamespace(
        step_key=step, timestamp=at, user_message=message,
        is_dagster_event=kind is not None, dagster_event_type=kind,
    )  # fmt: skip
    return SimpleNamespace(event_log_entry=entry)


def test_progress_lines_are_shown_for_long_steps_only():
    started = {}
    records = [
        _record("embeddings", DagsterEventType.STEP_START, at=100.0),
        _record("embeddings", message=PROGRESS_PREFIX + "embedded 100/900", at=101.0),
        _record("embeddings", message="not progress", at=100.0 + LONG_STEP_S + 1),
        _record("embeddings", message=PROGRESS_PREFIX + "embedded 800/900", at=100.0 + LONG_STEP_S),
    ]
    assert progress_messages(records, started) == ["embedded 800/900"]
    assert started == {"embeddings": 100.0}
