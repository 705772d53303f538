"""Comparing a generation with what serves, on the real stores: both kinds, and every refusal."""

from __future__ import annotations

import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.generations.registry import GenerationError
from candlefire_pipeline.operations.generations.compare import (
    evaluate_comparison,
    latest_comparison,
    run_comparison,
)
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.parity.gates import failed
from candlefire_pipeline_tests.generations.deployment import (
    build,
    deploy,
    drop_tables,
    failing_gates,
)


@pytest.fixture
def deployment(tmp_path, monkeypatch, pg_dsn):
    settings = deploy(monkeypatch, tmp_path, pg_dsn)
    yield settings
    drop_tables(settings)


def gates_of(report) -> dict:
    return {g["name"]: g for g in report.gates}


def test_a_model_change_is_judged_on_quality_and_passes(deployment):
    created = create_generation(deployment, "dim48", "hashing-v1:48")
    build(deployment, created)
    report = run_comparison(deployment, "dim48")
    assert report.kind == "quality" and "model hashing-v1 -> hashing-v1:48" in report.why
    assert report.target("reference") == ("chroma", "default")
    assert report.target("candidate") == ("pgvector", "dim48")
    quality = report.quality
    assert quality["judged"] == quality["queries"] == 60
    assert quality["ci_low"] <= quality["delta"] <= quality["ci_high"]
    gates = gates_of(report)
    assert not failing_gates(report.gates), failing_gates(report.gates)
    assert gates["grounding_agreement"]["threshold"] == 1.0  # same chunker: exactly
    assert "nDCG@10" in gates["rankings_hold"]["detail"]
    assert gates["ann_recall"]["value"] >= 0.95


def test_a_worse_model_fails_on_quality_with_its_interval(deployment):
    created = create_generation(deployment, "tiny", "hashing-v1:2")
    build(deployment, created)
    report = run_comparison(deployment, "tiny", backend="qdrant")
    gate = gates_of(report)["rankings_hold"]
    assert not gate["passed"] and gate["value"] < -0.3
    assert report.quality["ci_high"] < -deployment.generations.ndcg_drop
    assert report.target("candidate") == ("qdrant", "tiny")


def test_a_layout_change_keeps_the_overlap_gates(deployment):
    created = create_generation(deployment, "half", "hashing-v1", layout=IndexLayout("halfvec"))
    build(deployment, created)
    report = run_comparison(deployment, "half")
    assert report.kind == "overlap" and report.quality is None
    gate = gates_of(report)["rankings_hold"]
    assert gate["passed"] and "overlap comparison" in gate["detail"]
    assert gate["threshold"] == deployment.parity.mean_overlap


def test_a_generation_behind_the_drops_or_changed_after_the_report_fails(deployment):
    created = create_generation(deployment, "dim48", "hashing-v1:48")
    build(deployment, created, ["0001-demo-initial.jsonl"])  # the other drops not yet
    report = run_comparison(deployment, "dim48")
    gate = gates_of(report)["stores_hold_current_versions"]
    assert not gate["passed"] and "2 drops behind" in gate["detail"]
    build(deployment, created)  # now complete, but after the report read the ledger
    gates = {g.name: g for g in evaluate_comparison(deployment, report)}
    assert gates["stores_hold_current_versions"].passed
    assert not gates["report_is_fresh"].passed
    again = run_comparison(deployment, "dim48")
    assert not failing_gates(evaluate_comparison(deployment, again))


def test_no_judged_set_is_a_failing_gate_never_a_pass(deployment, monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_QUALITY_QUERIES", str(tmp_path / "absent.jsonl"))
    from candlefire_pipeline.settings import Settings

    settings = Settings.from_env()
    created = create_generation(settings, "dim48", "hashing-v1:48")
    build(settings, created)
    gate = gates_of(run_comparison(settings, "dim48"))["rankings_hold"]
    assert not gate["passed"] and "absent.jsonl not found" in gate["detail"]


def test_comparing_what_serves_or_an_unknown_generation_is_refused(deployment):
    with pytest.raises(GenerationError, match="no generation named 'nope'"):
        run_comparison(deployment, "nope")
    with pytest.raises(GenerationError, match="is what serves"):
        run_comparison(deployment, "default", backend="chroma")


def test_the_cli_writes_the_report_and_exits_by_verdict(deployment, capsys):
    created = create_generation(deployment, "tiny", "hashing-v1:2")
    build(deployment, created)
    assert candlefire(["generation", "compare", "tiny"]) == 1
    out = capsys.readouterr().out
    assert "kind: quality" in out and "FAILS rankings_hold" in out
    report, gates = latest_comparison(deployment, created)
    assert report is not None and "rankings_hold" in failed(gates)
    markdown = (deployment.generations_dir / created.gid / "reports" /
                f"compare-{report.report_id}.md").read_text()  # fmt: skip
    assert "Kind: quality" in markdown and "95% CI" in markdown
