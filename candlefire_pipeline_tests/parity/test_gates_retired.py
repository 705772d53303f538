"""The gates of a report made with Chroma retired: the exact oracle is the reference, pgvector's
p95 is held to Chroma's when it retired, the live gates say there is nothing to judge."""

from __future__ import annotations

import pytest

from candlefire_pipeline.parity.gates import GATES, evaluate_gates, gate_figures
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.parity.test_gates import CHUNKS, CURRENT, EXACT, _row, conformance

RETIRED = {"chroma": {"since": "2026-02-20T00:00:00+00:00", "report_id": "r-ret",
                      "reference_p95_ms": 20.0}}  # fmt: skip
LEDGER = {"chroma": {"b1": 100.0}, "pgvector": {"b1": 101.0, "b2": 201.0}}


def retired_report(p95=12.0, counts=(CHUNKS, CHUNKS), pg_diff=EXACT, overlap=0.97) -> ParityReport:
    """pgvector against the oracle (`memory`), Chroma retired; defaults pass every gate."""
    names = ["pgvector", "memory"]
    latency = {"pgvector": {"p50": 1.0, "p95": p95}, "memory": {"p50": 90.0, "p95": 300.0}}
    return ParityReport(
        report_id="r", created_at="2026-03-01T00:00:00+00:00", reference="memory",
        candidate="pgvector", oracle="memory", backends=names,
        queries=[_row(i, {n: ["1"] for n in names}) for i in range(30)],
        aggregates={
            "mean_overlap": overlap, "min_overlap": overlap, "grounding_agreement": 1.0,
            "grounding_checks": 10, "keyword_agreement": 1.0, "latency_ms": latency,
            "store_latency_ms": latency, "ann_recall": {"pgvector": 0.99},
        },
        divergences=[], chunk_counts=dict(zip(["memory", "pgvector"], counts, strict=True)),
        inventory={"differing": abs(counts[0] - counts[1])},
        started_at="2026-03-01T00:00:00+00:00",
        ledger={"read_at": "2026-03-01T00:00:00+00:00", "applied": LEDGER},
        store_diffs={"pgvector": pg_diff}, servers={"pgvector": CURRENT.to_dict()},
        conformance={"pgvector": conformance()}, retired=RETIRED,
    )  # fmt: skip


def gates(report: ParityReport, **thresholds) -> dict:
    found = evaluate_gates(report, ParityThresholds(**thresholds), LEDGER, CURRENT)
    return {g.name: g for g in found}


def test_a_retired_reference_report_passes_every_gate_judged_against_the_oracle():
    judged = gates(retired_report())
    assert list(judged) == list(GATES)
    assert [name for name, g in judged.items() if not g.passed] == []
    assert judged["corpus_size"].detail == f"pgvector {CHUNKS} chunks"  # the oracle is no store
    assert judged["stores_hold_current_versions"].detail == "pgvector: exact"
    assert "memory 500 chunks, pgvector 500" in judged["chunk_counts_equal"].detail


def test_the_p95_gate_holds_pgvector_to_chromas_p95_when_it_retired():
    passing = gates(retired_report(p95=12.0))["p95_ratio"]
    assert passing.passed and passing.value == pytest.approx(0.6)
    assert "pgvector 12.0 ms vs chroma 20.0 ms in report r-ret (retired on it)" in passing.detail
    slow = gates(retired_report(p95=40.0))["p95_ratio"]  # the oracle's 300 ms plays no part
    assert not slow.passed and slow.value == pytest.approx(2.0)


@pytest.mark.parametrize(
    "kwargs, gate",
    [
        ({"pg_diff": {**EXACT, "missing": 3}}, "stores_hold_current_versions"),
        ({"counts": (CHUNKS, CHUNKS - 2)}, "chunk_counts_equal"),
        ({"overlap": 0.5}, "mean_overlap"),
    ],
)
def test_pgvector_still_fails_on_what_the_oracle_sees(kwargs, gate):
    assert [n for n, g in gates(retired_report(**kwargs)).items() if not g.passed] == [gate]


def test_the_live_gates_say_chroma_is_retired_even_when_live_evidence_is_required():
    judged = gates(retired_report(), min_shadow_queries=50)
    for name in ("shadow_queries", "shadow_agreement", "shadow_errors"):
        assert judged[name].passed
        assert "chroma retired since 2026-02-20T00:00:00+00:00" in judged[name].detail
        assert gate_figures(judged[name]) == ("-", "not judged (retired)")


def test_the_report_page_gives_chroma_a_retired_column():
    report = retired_report()
    report.gates = [g.to_dict() for g in gates(report).values()]
    report.aggregates["stores"] = {"pgvector": {"mean_overlap": 0.97, "divergences": 0}}
    page = report_markdown(report)
    assert "chroma retired since 2026-02-20T00:00:00+00:00: not written, not compared" in page
    assert "| role | candidate | retired since 2026-02-20 |" in page
    assert "| chunks | 500 | retired |" in page
    assert report.role("chroma") == "retired"
