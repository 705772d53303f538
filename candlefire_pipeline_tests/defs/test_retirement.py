"""Retiring Chroma and the way back, through Dagster on real stores, with the soak lowered to a
day (and the history moved back two days, as if pgvector had served that long):

- the whole lifecycle: ingest, promote, shadow windows, retire; two more drops (Chroma passed
  over, its folder's bytes unchanged), a parity report and a shadow window without it, a
  rollback refused with the command that restores it; unretire, rollback, and the reader serves
  Chroma with pgvector's answers on every parity query;
- with Chroma's folder deleted: a drop, a parity report and a new generation's promotion.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.definitions import build_definitions
from candlefire_pipeline.defs.generations.build import build_generation
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.retirement.commands import retire
from candlefire_pipeline.operations.serving.commands import Order
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.state import (
    PINNED,
    PROMOTED,
    PROMOTED_RETIRED,
    read_state,
)
from candlefire_pipeline.operations.shadow.served import ShadowWorker
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.report.files import load_latest
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    check_results,
    metadata,
    pipeline_env,
)
from candlefire_pipeline_tests.defs.test_shadow_parity import QUERIES, live_traffic, window_run
from candlefire_pipeline_tests.generations.deployment import drop_tables
from candlefire_pipeline_tests.latency import ignore_machine_latency

SOAK_DAYS = 2  # the history is moved back this many days: more than the one-day soak


@pytest.fixture
def promoted(tmp_path, monkeypatch, fresh_pg_dsn):
    """The first demo drop in every store, promoted by the serving_backend asset; shadow reads
    of every request, a one-day soak. Yields (settings, pipeline, the demo drops' keys)."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", fresh_pg_dsn)
    monkeypatch.setenv("CANDLEFIRE_SHADOW_RATE", "1.0")
    monkeypatch.setenv("CANDLEFIRE_RETIRE_SOAK_DAYS", "1")
    # a search effort past the corpus size: Chroma's HNSW answers exactly, as pgvector's scan
    # does on a table this small, so the two can be compared answer for answer
    monkeypatch.setenv("CANDLEFIRE_CHROMA_EF_SEARCH", "1000")
    keys = [d.name for d in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(keys[0]).success
        assert metadata(pipeline.parity(), "serving_backend")["decision"] == "changed"
        yield Settings.from_env(), pipeline, keys
    drop_tables(settings)


def soaked(settings: Settings) -> None:
    """As if the switch had changed SOAK_DAYS days earlier: every history row moves back."""
    with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE serving_backend_history SET changed_at = changed_at - "
                     "make_interval(days => %s)", (SOAK_DAYS,))  # fmt: skip


def folder_digest(folder: Path) -> str:
    """Every file's path and bytes under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def hashes(store: str, settings: Settings) -> dict[str, str]:
    with opened_backend(store, settings) as backend:
        return backend.chunk_hashes()


def ingested_without_chroma(pipeline: Pipeline, key: str, settings: Settings) -> dict:
    """One more drop: every check passes, Chroma's says it is retired; its metadata."""
    run = pipeline.ingest(key)
    assert run.success and all(check_results(run).values())
    retired_checks = [e for e in run.get_asset_check_evaluations()
                      if e.asset_key == dg.AssetKey("chroma_chunks")]  # fmt: skip
    assert {e.check_name for e in retired_checks} == {
        "chroma_holds_current_versions", "chroma_dimension_matches_model", "stores_agree",
    }  # fmt: skip
    for evaluation in retired_checks:
        assert "not written" in evaluation.metadata["retired"].value
    assert key in StoreLedger(settings.batches_dir, "chroma").passed_over()
    return metadata(run, "chroma_chunks")


def parity_without_chroma(pipeline: Pipeline) -> None:
    run = pipeline.parity()
    assert not [name for name, passed in check_results(run).items() if not passed]
    meta = metadata(run, "parity_report")
    assert meta["retired_stores"].startswith("chroma since ")
    assert meta["stores"] == "pgvector (candidate), qdrant (evaluated)"
    assert metadata(run, "serving_backend")["decision"] == "unchanged"


def test_retire_then_drops_and_parity_then_unretire_and_rollback(promoted, capsys):
    settings, pipeline, keys = promoted
    live_traffic(settings, QUERIES[:20])
    window = window_run(pipeline)
    assert all(check_results(window).values())
    assert "| pgvector -> chroma | 20 | 20 | 0 |" in metadata(window, "shadow_parity")["window"]
    assert candlefire(["retire", "chroma", "--reason", "too early", "--by", "oncall"]) == 1
    assert "of the 1-day soak): retire after" in capsys.readouterr().err

    soaked(settings)
    report_id = load_latest(settings.reports_dir).report_id
    assert candlefire(["retire", "chroma", "--reason", "proven", "--by", "oncall"]) == 0
    state = read_state(settings.serving_file)
    assert (state.row, state.reference_retired.report_id) == (PROMOTED_RETIRED, report_id)
    before = folder_digest(settings.chroma_path)

    # the next scheduled runs: Chroma is passed over, the report and the window go without it
    meta = ingested_without_chroma(pipeline, keys[1], settings)
    assert meta["retired"].startswith("chroma retired since ") and "rows_written" not in meta
    parity_without_chroma(pipeline)
    report = load_latest(settings.reports_dir)
    assert (report.reference, report.oracle, report.role("chroma")) == ("memory", "memory",
                                                                        "retired")  # fmt: skip
    assert "| chunks | " in report_markdown(report) and "| retired |" in report_markdown(report)
    with ShadowWorker(settings) as worker, ServingReader(settings, shadow=worker) as reader:
        for query in QUERIES[:5]:
            reader.retrieve(query.text, query.entities, query.terms)
        assert (worker.stats.offered, reader.backend_name) == (0, "pgvector")  # none offered
    window = window_run(pipeline)
    assert all(check_results(window).values())
    assert "chroma retired since" in metadata(window, "shadow_parity")["gates"]
    assert candlefire(["status"]) == 0
    assert "chroma: RETIRED - since " in capsys.readouterr().out

    # the drop applied while pgvector served moved only its WAL position in the switch
    current = read_state(settings.serving_file)
    assert current.applied_lsn and replace(current, applied_lsn=state.applied_lsn) == state
    assert candlefire(["rollback", "--reason", "bad answers", "--by", "oncall"]) == 1
    assert 'Run `candlefire unretire chroma --reason "..."`' in capsys.readouterr().err
    assert read_state(settings.serving_file) == current
    meta = ingested_without_chroma(pipeline, keys[2], settings)  # two drops since retiring
    assert folder_digest(settings.chroma_path) == before  # not one byte written

    # the way back: rebuilt from the ledger, checked, then a rollback target again
    assert (
        candlefire(["unretire", "chroma", "--reason", "need the way back", "--by", "oncall"]) == 0
    )
    assert "chroma rebuilt from the ledger" in capsys.readouterr().out
    assert read_state(settings.serving_file).row == PROMOTED
    assert hashes("chroma", settings) == hashes("pgvector", settings)
    assert candlefire(["rollback", "--reason", "bad answers", "--by", "oncall"]) == 0
    assert read_state(settings.serving_file).state == PINNED
    # the reader serves Chroma again, and it answers as pgvector does on every parity query;
    # the next parity run compares the two again, every gate passing
    embedder = load_embedder(settings.model_id)
    with ServingReader(settings, embedder) as reader, opened_backend("pgvector", settings) as pg:
        pgvector = Retriever(pg, embedder, settings.retrieval, reader.reranker)
        for query in load_queries():
            served = reader.retriever().retrieve(query.text, list(query.entities), query.terms)
            expected = pgvector.retrieve(query.text, list(query.entities), query.terms)
            assert (served.pmids, served.grounding) == (expected.pmids, expected.grounding), (
                query.id
            )
        assert reader.backend_name == "chroma"
    after = pipeline.parity()
    assert all(check_results(after).values()) and metadata(after, "parity_report")[
        "stores"
    ].startswith("chroma (reference), pgvector (candidate)")
    assert metadata(after, "serving_backend")["decision"] == "refused"  # the pin holds
    rows = history(settings.pg_dsn, limit=5)
    assert [(r["event"], r["actor"], r["retired"]) for r in rows[:3]] == [
        ("rollback", "oncall", None), ("unretire", "oncall", None),
        ("retire", "oncall", "chroma"),
    ]  # fmt: skip
    assert (rows[2]["reason"], rows[2]["report_id"]) == ("proven", report_id)


def test_nothing_needs_the_chroma_folder_once_it_is_deleted(promoted, monkeypatch, capsys):
    settings, pipeline, keys = promoted
    ignore_machine_latency(monkeypatch)  # the comparison's latency: this shared machine's
    soaked(settings)
    said: list[str] = []
    done = retire(
        settings, "chroma", Order("retire", "proven", "oncall"), delete_files=True, say=said.append
    )
    assert done.outcome.state.row == PROMOTED_RETIRED and done.freed_bytes > 0
    assert not settings.chroma_path.exists()
    export = json.loads(done.export.read_text())
    assert export["targets"][0]["applied"] and export["retired"]["report_id"]
    ingested_without_chroma(pipeline, keys[1], settings)
    parity_without_chroma(pipeline)

    generation = create_generation(settings, "half", "hashing-v1", layout=IndexLayout("halfvec"))
    defs = build_definitions(Settings.from_env())
    built: list[str] = []
    assert build_generation(settings, generation, 2, defs, built.append, pipeline.instance) == 0
    assert candlefire(["generation", "compare", "half"]) == 0, capsys.readouterr().out
    assert "vs pgvector/default (serving)" in capsys.readouterr().out
    assert candlefire(["promote", "--generation", "half", "--reason", "smaller index"]) == 0
    assert "pgvector/half" in capsys.readouterr().out
    state = read_state(settings.serving_file)
    assert (str(state.target), state.row) == ("pgvector/half", PROMOTED_RETIRED)
    assert candlefire(["generation", "list"]) == 0
    listed = capsys.readouterr().out
    assert "UNREACHABLE" not in listed and "chroma" not in listed  # not opened, not listed
    assert not settings.chroma_path.exists()  # nothing opened it again
