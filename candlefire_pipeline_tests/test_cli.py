"""The `candlefire` command: query on every backend, status and rollback."""

import dagster as dg
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, pipeline_env


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, pg_dsn):
    monkeypatch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("cli")
    settings = pipeline_env(monkeypatch, tmp / "data", pg_dsn)
    first = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp)) as instance:
        assert Pipeline(instance).ingest(first).success
    yield settings
    monkeypatch.undo()


def _query(capsys, backend: str) -> list[str]:
    args = ["query", "SPG302 restores synapses in ALS", "--entity", "TDP-43", "--term", "SPG302"]
    assert candlefire([*args, "--term", "zz-absent-9", "--backend", backend]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if not line.startswith("timings")]


def test_query_prints_the_same_ranking_and_grounding_on_every_backend(ingested, capsys):
    outputs = {name: _query(capsys, name) for name in ("pgvector", "chroma", "qdrant", "memory")}
    assert outputs["pgvector"] == outputs["chroma"] == outputs["qdrant"] == outputs["memory"]
    lines = outputs["memory"]
    assert len([line for line in lines[1:] if not line.startswith("term")]) == 15
    assert "term 'SPG302': grounded in corpus=True" in "\n".join(lines)
    assert "term 'zz-absent-9': grounded in corpus=False, in abstract=False" in lines


def test_status_then_rollback_records_chroma(ingested, capsys):
    assert candlefire(["status"]) == 0
    out = capsys.readouterr().out
    assert "serving backend: chroma" in out and "pgvector:" in out and "chroma:" in out
    assert "qdrant:" in out and "UNREACHABLE" not in out
    assert candlefire(["rollback", "--reason", "drill"]) == 0
    assert "serving backend: chroma" in capsys.readouterr().out
    assert ingested.serving_file.exists()


def test_status_fails_loudly_when_chroma_server_is_unreachable(ingested, capsys, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CANDLEFIRE_CHROMA_PORT", "9")  # discard port: nothing listens
    assert candlefire(["status"]) == 2
    assert "chroma: UNREACHABLE" in capsys.readouterr().out
