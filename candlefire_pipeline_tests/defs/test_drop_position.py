"""The pgvector store asset records its drop's WAL position in the switch while pgvector serves
(how far a read replica must replay to show the drop), and nothing while Chroma serves."""

from __future__ import annotations

import dagster as dg

from candlefire_pipeline.backends.pg.wal import lsn_value
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.operations.serving.machine import AUTO_PROMOTE, Evidence, transition
from candlefire_pipeline.operations.serving.state import read_state
from candlefire_pipeline.parity.gate_result import GateResult
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata, pipeline_env

PASSING = Evidence("r-drop", gates=(GateResult("every_gate", True, 1.0, 1.0, "passed"),))


def test_a_drop_applied_while_pgvector_serves_records_its_wal_position(
    tmp_path, monkeypatch, pg_dsn
):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    drops = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        first = pipeline.ingest(drops[0])
        assert metadata(first, "pgvector_chunks")["wal_lsn"] == "not recorded"  # Chroma serves
        assert read_state(settings.serving_file).applied_lsn is None

        promoted = transition(settings, AUTO_PROMOTE, "drop position test", "tester", PASSING,
                              dsn=pg_dsn).state  # fmt: skip
        second = pipeline.ingest(drops[1])
        recorded = metadata(second, "pgvector_chunks")["wal_lsn"]
        state = read_state(settings.serving_file)
        assert state.applied_lsn == recorded and state.wal_lsn == promoted.wal_lsn
        assert lsn_value(recorded) > lsn_value(promoted.wal_lsn)  # after the drop's commit
        assert (state.state, state.report_id) == (promoted.state, promoted.report_id)
