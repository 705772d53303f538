"""The pgvector version floor on a real server below it (the old wheel's: pgvector 0.8.2), used
as an external server: writes go on, `candlefire status` says why it is below, promotion is
refused by the pgvector_version gate, and after an in-place upgrade a new report promotes."""

from __future__ import annotations

import logging

import dagster as dg

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.operations.parity import (
    evaluate_report,
    latest_evaluation,
    open_named_stores,
    run_report,
)
from candlefire_pipeline.operations.serving.machine import INITIAL, PROMOTED, read_state
from candlefire_pipeline.parity.gates import failed
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, pipeline_env
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.old_pg import OLD_PGVECTOR, old_server

FIXES = (
    "0.8.3 (possible HNSW index corruption during vacuum)",
    "0.8.4 (the `hnsw graph not repaired` error when vacuuming HNSW)",
)


def _report(settings: Settings):
    embedder = load_embedder(settings.model_id)
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    return report


def test_an_old_server_takes_writes_never_promotes_and_upgrades_in_place(
    tmp_path, monkeypatch, capsys, caplog
):
    with pg_data_root() as root:
        with old_server(root / "pg") as old_dsn:
            settings = pipeline_env(monkeypatch, tmp_path / "data", old_dsn)
            first = write_demo_drops(settings.drops_dir)[0].name
            with (
                caplog.at_level(logging.WARNING),
                dg.instance_for_test(temp_dir=str(tmp_path)) as instance,
            ):
                assert Pipeline(instance).ingest(first).success  # writes continue below the floor
            warned = [r.getMessage() for r in caplog.records if "below 0.8.4" in r.getMessage()]
            assert warned and all(fix in warned[0] for fix in FIXES)

            assert candlefire(["status"]) == 0
            out = capsys.readouterr().out
            assert f"(Postgres 18.3, pgvector {OLD_PGVECTOR})" in out
            assert "pgvector: BELOW THE VERSION FLOOR - pgvector 0.8.2 is below 0.8.4" in out
            assert all(fix in out for fix in FIXES) and "ALTER EXTENSION vector UPDATE" in out

            report = _report(settings)
            assert report.servers["pgvector"]["pgvector"] == OLD_PGVECTOR
            gates = {g.name: g for g in evaluate_report(settings, report)}
            assert failed(list(gates.values())) == ["pgvector_version"]
            assert all(fix in gates["pgvector_version"].detail for fix in FIXES)
            assert candlefire(["promote", "--reason", "try the old server"]) == 1
            err = capsys.readouterr().err
            assert "refused" in err and "pgvector_version" in err
            assert read_state(settings.serving_file).state == INITIAL

        # upgraded in place: the same data directory on the new binaries
        server = EmbeddedPostgres(root / "pg")
        try:
            monkeypatch.setenv("CANDLEFIRE_PG_DSN", server.dsn)
            settings = Settings.from_env()
            gate = {g.name: g for g in evaluate_report(settings, report)}["pgvector_version"]
            assert not gate.passed and "re-run parity_report" in gate.detail  # old evidence
            assert _report(settings).servers["pgvector"]["pgvector"] == "0.8.6"
            assert failed(latest_evaluation(settings)[1]) == []
            assert candlefire(["promote", "--reason", "upgraded to pgvector 0.8.6"]) == 0
            assert read_state(settings.serving_file).state == PROMOTED
            assert candlefire(["status"]) == 0
            assert "BELOW THE VERSION FLOOR" not in capsys.readouterr().out
        finally:
            server.stop()
