"""The app's own collection in the parity report and the gate that holds the flip on it, through
the operator's sequence: configured -> reported -> compared (differs) -> imported -> the app's
collection changes -> it disappears. The app's folder is never written by any verb."""

from __future__ import annotations

import os
import shutil

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.parity import evaluate_report, open_named_stores, run_report
from candlefire_pipeline.operations.serving.commands import auto_promote
from candlefire_pipeline.operations.serving.machine import CHANGED, REFUSED
from candlefire_pipeline.parity.app_gate import NAME, app_collection_gate
from candlefire_pipeline.parity.gates import failed
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.adoption.app_indexer import index_papers
from candlefire_pipeline_tests.adoption.scenario import folder_checksum
from candlefire_pipeline_tests.defs.pipeline_harness import demo_deployment
from candlefire_pipeline_tests.fixtures_backends import fresh_database
from candlefire_pipeline_tests.latency import ignore_machine_latency

#: a paper only the app's collection holds, written so that the SPG302 queries find it
EXTRA = {"pmid": "99000001", "title": "SPG302 and synaptic density", "year": 2024,
         "abstract": "SPG302 restored synaptic density in ALS mice.", "doi": "",
         "mesh_terms": ["ALS"], "citation_count": 3, "entity_names": ["SPG302"]}  # fmt: skip


def gate(gates):
    return next(g for g in gates if g.name == NAME)


#: The settings demo_deployment points at its data dir, database and table (pipeline_env).
DEPLOYMENT_ENV = ("CANDLEFIRE_DATA_DIR", "CANDLEFIRE_PG_DSN", "CANDLEFIRE_PG_TABLE",
                  "CANDLEFIRE_EMBED_MODEL")  # fmt: skip


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, pg_dsn):
    """The first demo drop in every store; the app's collection built by candle-fire's rules
    from the same papers and one the pipeline never got. Built once in a database of its own;
    each test gets a copy (folders and database): the tests import, flip and delete the app."""
    root = tmp_path_factory.mktemp("adopting")
    with fresh_database(pg_dsn) as dsn, pytest.MonkeyPatch.context() as patch:
        ignore_machine_latency(patch)
        settings, embedder = demo_deployment(patch, root, dsn)
        batch = next(d for d in settings.batches_dir.iterdir() if (d / "papers.parquet").is_file())
        papers = [{**p, "year": p["year"] or 0, "doi": p["doi"] or ""}  # as candle-fire's records
                  for p in pq.read_table(batch / "papers.parquet").to_pylist()]  # fmt: skip
        index_papers(root / "app-chroma", [*papers, EXTRA], embedder_for(settings, "bulk").embed)
        yield root, {name: os.environ[name] for name in DEPLOYMENT_ENV}, embedder


@pytest.fixture
def adopting(deployed, tmp_path, monkeypatch):
    """A copy of the deployment, the app's collection configured."""
    root, env, embedder = deployed
    ignore_machine_latency(monkeypatch)  # a property of this shared machine, not of the index
    for folder in ("data", "app-chroma"):
        shutil.copytree(root / folder, tmp_path / folder, symlinks=True)
    with fresh_database(env["CANDLEFIRE_PG_DSN"], copy_of=env["CANDLEFIRE_PG_DSN"]) as dsn:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
        monkeypatch.setenv("CANDLEFIRE_PG_DSN", dsn)
        monkeypatch.setenv("CANDLEFIRE_APP_CHROMA_PATH", str(tmp_path / "app-chroma"))
        yield Settings.from_env(), embedder, tmp_path / "app-chroma"


def test_the_gate_holds_the_flip_until_the_apps_collection_is_reported_and_imported(
    adopting, capsys
):
    settings, embedder, app = adopting
    pg_dsn = settings.pg_dsn  # the deployment's database (a copy of the module's)
    before = folder_checksum(app)
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    held = gate(evaluate_report(settings, report))  # configured, never reported
    assert not held.passed and "no adoption report" in held.detail
    assert auto_promote(settings, report, evaluate_report(settings, report),
                        dsn=pg_dsn).decision.outcome == REFUSED  # fmt: skip

    assert candlefire(["adopt", "report"]) == 0
    assert "1 only_in_app" in capsys.readouterr().out
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    section = report.app_collection
    assert section["queries"] == len(report.queries) and section["differing"] >= 1
    # every difference is the extra paper, and what it pushed down a list
    assert (
        set(section["causes"]) <= {"only_in_app", "displaced"} and section["causes"]["only_in_app"]
    )
    differing = [row for row in section["rows"] if not row["equal"]]
    assert all(
        "99000001"
        in row["app_top"] + [c["chunk_id"] for d in row["differences"] for c in d["chunks"]]
        for row in differing
    )
    assert "spg302-synapses" in {row["query_id"] for row in differing}
    held = gate(evaluate_report(settings, report))
    assert not held.passed and "never_in_ledger" not in held.detail
    assert "only_in_app" in held.detail and "candlefire adopt import" in held.detail
    assert "The app's own collection" in report_markdown(report)
    assert "spg302-synapses" in report_markdown(report)
    assert folder_checksum(app) == before

    assert candlefire(["adopt", "import"]) == 0
    assert "imported" in capsys.readouterr().out
    passed = gate(evaluate_report(settings, report))
    assert passed.passed and passed.shown_value == "imported"
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    assert report.app_collection["differing"] == 0  # the stores hold the app's rows now
    gates = evaluate_report(settings, report)
    assert gate(gates).passed
    assert failed(gates) == []
    assert candlefire(["adopt", "status"]) == 0
    assert "current" in capsys.readouterr().out
    assert folder_checksum(app) == before

    index_papers(app, [{**EXTRA, "pmid": "99000002"}], embedder_for(settings, "bulk").embed)
    stale = gate(evaluate_report(settings, report))  # the app's collection changed since
    assert not stale.passed and "read another version" in stale.detail
    assert auto_promote(settings, report, evaluate_report(settings, report),
                        dsn=pg_dsn).decision.outcome == REFUSED  # fmt: skip
    shutil.rmtree(app)
    gone = gate(evaluate_report(settings, report))
    assert not gone.passed and gone.shown_value == "unknown" and "does not exist" in gone.detail


def test_with_the_import_current_the_flip_goes_ahead(adopting):
    settings, embedder, _ = adopting
    pg_dsn = settings.pg_dsn  # the deployment's database (a copy of the module's)
    assert candlefire(["adopt", "import"]) == 0
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    gates = evaluate_report(settings, report)
    assert failed(gates) == []
    assert auto_promote(settings, report, gates, dsn=pg_dsn).decision.outcome == CHANGED


@pytest.mark.parametrize(
    ("adoption", "section", "passed", "words"),
    [
        (None, {}, True, "no app collection is configured"),
        ({"error": "cannot read"}, {}, False, "unknown: cannot read"),
        ({"fingerprint": "a" * 64, "report_id": None, "report_fingerprint": None},
         {}, False, "no adoption report"),
        ({"fingerprint": "a" * 64, "report_id": "r", "report_fingerprint": "a" * 64,
          "imported": {"complete": False}}, {"error": "boom"}, False, "boom"),
        ({"fingerprint": "a" * 64, "report_id": "r", "report_fingerprint": "a" * 64,
          "imported": {"complete": False}},
         {"fingerprint": "b" * 64, "queries": 3, "differing": 0}, False, "another version"),
        ({"fingerprint": "a" * 64, "report_id": "r", "report_fingerprint": "a" * 64,
          "imported": {"complete": False}},
         {"fingerprint": "a" * 64, "queries": 3, "differing": 0, "causes": {}, "rows": []},
         True, "3 of 3 queries answer as"),
        ({"fingerprint": "a" * 64, "report_id": "r", "report_fingerprint": "a" * 64,
          "imported": {"complete": True, "summary": "imported (x)"}}, {}, True, "imported (x)"),
    ],
)  # fmt: skip
def test_the_gate_reads_its_evidence(adoption, section, passed, words):
    class Report:
        app_collection = section

    result = app_collection_gate(Report(), adoption)
    assert result.passed is passed and words in result.detail
