"""The one definition of the gates: arithmetic, vacuous evidence, freshness, formatting."""

from __future__ import annotations

import math
import re

import pytest

from candlefire_pipeline.backends.pg.version import ServerVersions
from candlefire_pipeline.parity.gates import (
    GATES,
    INLINE_MARKDOWN_CHARS,
    evaluate_gates,
    failed,
    format_gate_table,
    gate_rows,
    gate_table_markdown,
)
from candlefire_pipeline.parity.report.model import ParityReport, QueryRow
from candlefire_pipeline.settings import ParityThresholds

LEDGER = {"chroma": {"b1": 100.0, "b2": 200.0}, "pgvector": {"b1": 101.0, "b2": 201.0}}
EXACT = {"missing": 0, "orphaned": 0, "stale": 0}
CHUNKS = 500
CURRENT = ServerVersions("18.6", "0.8.6", "0.8.6")


def _row(i: int, top: dict[str, list[str]]) -> QueryRow:
    return QueryRow(
        query_id=f"q{i}", text="t", top=top, overlap=1.0, jaccard=1.0, recall=1.0, rbo=1.0,
        grounding_equal=True, keyword_equal=True, latency_ms={}, store_ms={},
    )  # fmt: skip


def conformance(differing: int = 0, queries: int = 110) -> dict:
    """A store's conformance as operations/conformance.py records it (110 queries x 8 checks)."""
    counts = {"search": {"identical": 103 - differing, "reference_miss": 7, "store_miss": 0,
                         "differs": differing}}  # fmt: skip
    failures = [{"query_id": "q7", "check": "search", "detail": "position 3: ..."}] * differing
    return {"store": "pgvector", "queries": queries, "counts": counts, "swaps": 4, "misses": 9,
            "failures": failures, "differing": differing, "passed": not differing}  # fmt: skip


def synthetic(
    p95_ref=10.0, p95_cand=12.0, grounding=1.0, checks=10, overlap=0.95, counts=(CHUNKS, CHUNKS),
    differing=0, ann=1.0, queries=30, answered=None, ledger=LEDGER, diffs=None, oracle="memory",
    conformed=None,
) -> ParityReport:  # fmt: skip
    """A report with every figure set by hand; defaults pass every default gate."""
    names = ["chroma", "pgvector", *([oracle] if oracle else [])]
    latency = {"chroma": {"p50": 1.0, "p95": p95_ref}, "pgvector": {"p50": 1.0, "p95": p95_cand}}
    if oracle:
        latency[oracle] = {"p50": 1.0, "p95": 1.0}
    whole = {name: {"p50": 99.0, "p95": 99.0} for name in latency}  # the gate must not use it
    answered = queries if answered is None else answered
    rows = [_row(i, {n: (["1"] if i < answered else []) for n in names}) for i in range(queries)]
    chunk_counts = dict(zip(["chroma", "pgvector"], counts, strict=True))
    if oracle:
        chunk_counts[oracle] = counts[0]
    return ParityReport(
        report_id="r", created_at="2025-01-01T00:00:00+00:00", reference="chroma",
        candidate="pgvector", oracle=oracle, backends=names, queries=rows,
        aggregates={
            "mean_overlap": overlap, "min_overlap": overlap, "grounding_agreement": grounding,
            "grounding_checks": checks, "keyword_agreement": 1.0, "latency_ms": whole,
            "store_latency_ms": latency,
            "ann_recall": {"chroma": 1.0, "pgvector": ann} if oracle else {},
        },
        divergences=[], chunk_counts=chunk_counts, inventory={"differing": differing},
        started_at="2025-01-01T00:00:00+00:00",
        ledger={"read_at": "2025-01-01T00:00:00+00:00", "applied": ledger},
        store_diffs=diffs if diffs is not None else {"chroma": EXACT, "pgvector": EXACT},
        servers={"pgvector": CURRENT.to_dict()},
        conformance={"pgvector": conformance()} if conformed is None else conformed,
    )  # fmt: skip


def _gates(report, ledger_now=LEDGER, pgvector_now=CURRENT, **thresholds):
    thresholds = ParityThresholds(**thresholds)
    return {g.name: g for g in evaluate_gates(report, thresholds, ledger_now, pgvector_now)}


def test_the_default_synthetic_report_passes_every_gate_in_order():
    gates = evaluate_gates(synthetic(), ParityThresholds(), LEDGER, CURRENT)
    assert [g.name for g in gates] == list(GATES)
    assert failed(gates) == [], gates


@pytest.mark.parametrize(
    "report_kwargs, gate, passed, value",
    [
        ({"grounding": 0.99}, "grounding_agreement", False, 0.99),
        ({"checks": 0, "grounding": 1.0}, "grounding_agreement", False, 0.0),  # nothing compared
        ({"overlap": 0.9}, "mean_overlap", True, 0.9),
        ({"overlap": 0.89}, "mean_overlap", False, 0.89),
        ({"queries": 0, "overlap": 1.0}, "mean_overlap", False, 0.0),  # no query, no overlap
        ({"p95_ref": 10.0, "p95_cand": 15.0}, "p95_ratio", True, 1.5),
        ({"p95_ref": 10.0, "p95_cand": 15.5}, "p95_ratio", False, 1.55),
        ({"p95_ref": 0.0, "p95_cand": 0.0}, "p95_ratio", True, 1.0),
        ({"p95_ref": 0.0, "p95_cand": 1.0}, "p95_ratio", False, math.inf),
        ({"counts": (CHUNKS, CHUNKS - 1)}, "chunk_counts_equal", False, 1.0),
        # equal counts but one chunk each side the other lacks: still not the same store
        ({"differing": 2}, "chunk_counts_equal", False, 2.0),
        ({"ann": 0.94}, "ann_recall", False, 0.94),
        ({"ann": 0.95}, "ann_recall", True, 0.95),
        ({"oracle": None}, "ann_recall", False, 0.0),  # no exact oracle: recall unknown
        ({"counts": (0, 0)}, "corpus_size", False, 0.0),  # empty stores
        ({"counts": (99, 99)}, "corpus_size", False, 99.0),
        ({"counts": (CHUNKS, 0)}, "corpus_size", False, 0.0),  # one store emptied
        ({"queries": 19}, "queries_with_results", False, 19.0),
        ({"queries": 30, "answered": 19}, "queries_with_results", False, 19.0),
        ({"queries": 30, "answered": 20}, "queries_with_results", True, 20.0),
        ({"diffs": {"chroma": EXACT}}, "stores_hold_current_versions", False, 1.0),
        ({"diffs": {}}, "stores_hold_current_versions", False, 1.0),
        (
            {"diffs": {"chroma": EXACT, "pgvector": {"missing": 2, "orphaned": 1, "stale": 3}}},
            "stores_hold_current_versions", False, 6.0,
        ),
        ({"ledger": {"chroma": {}, "pgvector": {}}}, "stores_hold_current_versions", False, 1.0),
        ({"conformed": {"pgvector": conformance(differing=2)}}, "candlefire_conformance", False,
         2.0),
        # no evidence never passes: no conformance, fixtures missing, nothing checked
        ({"conformed": {}}, "candlefire_conformance", False, 1.0),
        ({"conformed": {"pgvector": {"error": "fixtures at /x lack papers.jsonl"}}},
         "candlefire_conformance", False, 1.0),
        ({"conformed": {"pgvector": conformance(queries=0)}}, "candlefire_conformance", False,
         1.0),
        # only the candidate is judged: Chroma's own index misses show in its column only
        ({"conformed": {"pgvector": conformance(), "chroma": conformance(differing=3)}},
         "candlefire_conformance", True, 0.0),
    ],
)  # fmt: skip
def test_each_gate(report_kwargs, gate, passed, value):
    found = _gates(synthetic(**report_kwargs))
    assert (found[gate].passed, found[gate].value) == (passed, pytest.approx(value)), found[gate]
    others = [g for g in failed(list(found.values())) if g != gate]
    # one bad figure fails its own gate; only evidence-starved reports fail more than one
    if gate not in ("corpus_size", "mean_overlap", "queries_with_results", "ann_recall",
                    "stores_hold_current_versions"):  # fmt: skip
        assert others == [], others


def test_an_empty_deployment_fails_with_named_gates():
    empty = {"chroma": {}, "pgvector": {}}
    report = synthetic(counts=(0, 0), queries=58, answered=0, ledger=empty, checks=0)
    gates = _gates(report, ledger_now=empty)
    assert {"report_is_fresh", "corpus_size", "queries_with_results", "grounding_agreement",
            "stores_hold_current_versions"} <= set(failed(list(gates.values())))  # fmt: skip
    assert "no batch had been applied" in gates["report_is_fresh"].detail
    assert "empty: chroma, pgvector" in gates["corpus_size"].detail
    assert "no grounding checks" in gates["grounding_agreement"].detail


@pytest.mark.parametrize(
    "now, fresh, shown",
    [
        (LEDGER, True, "unchanged"),
        # a batch applied after the report read the ledger (also mid-run)
        ({**LEDGER, "pgvector": {**LEDGER["pgvector"], "b3": 300.0}}, False, "pgvector:b3"),
        # the same batch re-applied (a re-materialized partition)
        ({**LEDGER, "chroma": {"b1": 100.0, "b2": 250.0}}, False, "chroma:b2"),
        # a marker vanished (batches dir wiped or restored from backup)
        ({**LEDGER, "chroma": {"b1": 100.0}}, False, "chroma:b2"),
        # a new store appeared in the ledger (e.g. a third evaluated store)
        ({**LEDGER, "qdrant": {"b1": 150.0}}, False, "qdrant:b1"),
        (None, False, "cannot be read"),
    ],
)
def test_freshness_compares_the_ledger_now_with_the_ledger_the_report_read(now, fresh, shown):
    gate = _gates(synthetic(), ledger_now=now)["report_is_fresh"]
    assert gate.passed is fresh and shown in gate.detail, gate


def test_a_report_that_does_not_record_its_ledger_is_not_fresh():
    report = synthetic()
    report.ledger = {}
    gate = _gates(report)["report_is_fresh"]
    assert not gate.passed and gate.detail.startswith("unknown")


def test_gates_use_the_given_thresholds():
    gates = _gates(synthetic(), mean_overlap=0.99, p95_ratio=1.1, min_corpus_chunks=501)
    assert not gates["mean_overlap"].passed and gates["mean_overlap"].threshold == 0.99
    assert not gates["p95_ratio"].passed and gates["p95_ratio"].threshold == 1.1
    assert not gates["corpus_size"].passed and gates["corpus_size"].threshold == 501


def test_gate_tables_show_every_gate_with_result_and_threshold():
    gates = evaluate_gates(synthetic(ann=0.5), ParityThresholds(), LEDGER, CURRENT)
    md = gate_table_markdown(gates)
    assert md.splitlines()[0] == "| gate | result | value | threshold | detail |"
    assert "| ann_recall | FAIL | 0.5 | >= 0.95 |" in md
    assert len(md.splitlines()) == 2 + len(GATES)
    text = format_gate_table(gates)
    assert all(name in text for name in GATES)
    assert [line.split()[1] for line in text.splitlines()[1:]].count("FAIL") == 1


def test_a_gate_table_for_the_ui_is_cut_to_fit_and_keeps_every_row():
    gates = evaluate_gates(synthetic(ann=0.5), ParityThresholds(), LEDGER, CURRENT)
    full = gate_table_markdown(gates)
    assert gate_table_markdown(gates, limit=len(full) + 1) == full  # it fits: nothing cut
    failing = [g for g in gates if not g.passed]
    assert "ann_recall" in [g.name for g in failing]
    # room for every failing gate's whole detail once every passing one is cut to a stub
    floor = len(gate_table_markdown(gates, limit=1))
    limit = floor + sum(len(g.detail) for g in failing)
    assert limit < len(full)
    cut = gate_table_markdown(gates, limit=limit)
    assert len(cut) < limit and "…" in cut
    assert [line.split("|")[1].strip() for line in cut.splitlines()[2:]] == list(GATES)
    assert "| ann_recall | FAIL | 0.5 | >= 0.95 |" in cut
    assert all(g.detail in cut for g in failing)  # passing gates' details are cut first


OLD = ServerVersions("18.3", "0.8.2", "0.8.2")
BETWEEN = ServerVersions("17.2", "0.8.3", "0.8.3")


@pytest.mark.parametrize(
    "ran_on, now, passed, value, shown",
    [
        (CURRENT, CURRENT, True, 0.0, "0.8.6 when the report ran, 0.8.6 now (floor 0.8.4)"),
        (ServerVersions("18.6", "0.8.4"), ServerVersions("18.6", "0.8.4"), True, 0.0, "0.8.4 now"),
        (CURRENT, OLD, False, 2.0, "0.8.3 (possible HNSW index corruption during vacuum) and "
         "0.8.4 (the `hnsw graph not repaired` error when vacuuming HNSW)"),
        (CURRENT, BETWEEN, False, 1.0, "lacks the fixes of 0.8.4 (the `hnsw graph not"),
        # the report's evidence came from the old server: upgraded since, it must be re-run
        (OLD, CURRENT, False, 2.0, "re-run parity_report"),
        # installed files are newer than the extension: the detail says which command is missing
        (CURRENT, ServerVersions("18.6", "0.8.2", "0.8.6"), False, 2.0,
         "pgvector 0.8.6 is installed on the server: run `ALTER EXTENSION vector UPDATE`"),
        (None, CURRENT, False, 1.0, "unknown: the report does not record"),
        (CURRENT, None, False, 1.0, "unknown: the pgvector version of the pgvector server"),
        (CURRENT, ServerVersions("18.6", None, "0.8.6"), False, 1.0, "cannot be read now"),
    ],
)  # fmt: skip
def test_the_pgvector_version_floor(ran_on, now, passed, value, shown):
    report = synthetic()
    report.servers = {"pgvector": ran_on.to_dict()} if ran_on else {}
    gates = _gates(report, pgvector_now=now)
    gate = gates["pgvector_version"]
    assert (gate.passed, gate.value) == (passed, value) and shown in gate.detail, gate
    assert [g for g in failed(list(gates.values())) if g != "pgvector_version"] == []


@pytest.mark.parametrize(
    "report_kwargs, judged_with, gate, value, threshold",
    [
        # what a fresh clone's demo shows: versions, checks passed / checked, not required
        ({}, {}, "pgvector_version", "0.8.6", ">= 0.8.4"),
        ({}, {}, "candlefire_conformance", "110 / 110", "all"),
        ({}, {}, "shadow_queries", "0", "not required"),
        ({}, {}, "shadow_agreement", "0 compared", "not required"),
        ({}, {}, "shadow_errors", "0 reads", "not required"),
        # numbers keep the comparison they are held to
        ({}, {}, "report_is_fresh", "0", "= 0"),
        ({"ann": 0.5}, {}, "ann_recall", "0.5", ">= 0.95"),
        ({"p95_cand": 15.5}, {}, "p95_ratio", "1.55", "<= 1.5"),
        ({"counts": (99, 99)}, {}, "corpus_size", "99", ">= 100"),
        # the version the floor judges: the lower of the report's server and the server now
        ({}, {"pgvector_now": BETWEEN}, "pgvector_version", "0.8.3", ">= 0.8.4"),
        ({}, {"pgvector_now": None}, "pgvector_version", "unknown", ">= 0.8.4"),
        ({"conformed": {"pgvector": conformance(differing=2)}}, {}, "candlefire_conformance",
         "108 / 110", "all"),
        ({"conformed": {"pgvector": conformance(queries=0)}}, {}, "candlefire_conformance",
         "none checked", "all"),
        ({"conformed": {"pgvector": {"error": "no fixtures"}}}, {}, "candlefire_conformance",
         "error", "all"),
        ({"conformed": {}}, {}, "candlefire_conformance", "unknown", "all"),
        ({"oracle": None}, {}, "ann_recall", "unknown", ">= 0.95"),
        ({"diffs": {}}, {}, "stores_hold_current_versions", "unknown", "= 0"),
        ({}, {"ledger_now": None}, "report_is_fresh", "unknown", "= 0"),
        ({"ledger": {"chroma": {}, "pgvector": {}}}, {}, "report_is_fresh", "empty ledger", "= 0"),
        # live evidence required: too few comparisons fail, saying how many judging needs
        ({}, {"min_shadow_queries": 5}, "shadow_queries", "0", ">= 5"),
        ({}, {"min_shadow_queries": 5}, "shadow_agreement", "0 compared", ">= 5 to judge"),
        ({}, {"min_shadow_queries": 5}, "shadow_errors", "0 reads", ">= 5 to judge"),
    ],
)  # fmt: skip
def test_each_value_in_the_gate_tables_says_what_it_means(
    report_kwargs, judged_with, gate, value, threshold
):
    found = _gates(synthetic(**report_kwargs), **judged_with)
    row = next(r for r in gate_rows(list(found.values())) if r[0] == gate)
    assert row[2:4] == (value, threshold), found[gate]
    assert f"| {gate} | {row[1]} | {value} | {threshold} |" in gate_table_markdown([found[gate]])
    terminal = format_gate_table([found[gate]]).splitlines()[1]
    assert re.search(rf"^  {gate} .* {re.escape(value)} +{re.escape(threshold)} ", terminal)


def test_the_version_floor_is_unknown_when_nothing_is_read():
    """No versions read now (the default) is never a pass."""
    gates = evaluate_gates(synthetic(), ParityThresholds(), LEDGER)
    assert failed(gates) == ["pgvector_version"]


def test_the_metadata_gate_table_fits_the_ui_inline_limit_even_when_every_gate_fails():
    """Long failure details are cut (…) so the table stays under the UI's inline limit."""
    failing = synthetic(grounding=0.5, overlap=0.1, ann=0.1, counts=(CHUNKS, 3), differing=9)
    gates = evaluate_gates(failing, ParityThresholds(), {"x": {"b9": 1.0}}, OLD)
    assert len(gate_table_markdown(gates)) > INLINE_MARKDOWN_CHARS  # the full table does not
    short = gate_table_markdown(gates, INLINE_MARKDOWN_CHARS)
    assert len(short) < INLINE_MARKDOWN_CHARS and "…" in short
    assert [line.split("|")[1].strip() for line in short.splitlines()[2:]] == list(GATES)
    assert [line.split("|")[2].strip() for line in short.splitlines()[2:]].count("FAIL") >= 6
