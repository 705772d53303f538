"""The `candlefire` command: query on every backend, status, rollback and promote."""

import shutil

import dagster as dg
import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.operations.serving.history import pending_entries
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    PINNED,
    PROMOTED,
    Window,
    read_state,
)
from candlefire_pipeline.operations.serving.watch import watch
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
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


def test_the_operator_commands_walk_the_transition_table(ingested, capsys, monkeypatch):
    """Each (state, operator event) of operations/serving.TRANSITIONS through the CLI."""
    settings = ingested
    for path in (settings.serving_file, settings.serving_pending_file):
        path.unlink(missing_ok=True)
    shutil.rmtree(settings.reports_dir, ignore_errors=True)

    def run(*args: str) -> tuple[int, str, str]:
        code = candlefire(list(args))
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def state():
        return read_state(settings.serving_file)

    code, _, err = run("promote", "--reason", "go")  # never promoted, no report yet
    assert code == 1 and "no parity report" in err and not settings.serving_file.exists()
    code, out, _ = run("promote", "--reason", "go", "--run-report", "--by", "alice")
    assert code == 0 and state().state == PROMOTED and "promoted on report" in out
    code, out, _ = run("promote", "--reason", "again")
    assert code == 0 and "nothing to do: already serving pgvector" in out
    code, out, _ = run("rollback", "--reason", "incident 1", "--by", "bob")
    assert code == 0 and state().state == PINNED and "PINNED by bob" in out

    pinned = settings.serving_file.read_bytes()
    code, _, err = run("promote", "--reason", "too early")  # the report predates the pin
    assert code == 1 and "not newer than the pin" in err
    monkeypatch.setenv("CANDLEFIRE_PARITY_MIN_CHUNKS", "1000000")  # stricter: the report fails
    code, _, err = run("promote", "--reason", "still failing")
    assert code == 1 and "fails gates: corpus_size" in err
    monkeypatch.delenv("CANDLEFIRE_PARITY_MIN_CHUNKS")
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", f"postgresql://u@127.0.0.1:{procs.free_port()}/x")
    code, _, err = run("promote", "--reason", "pgvector is down", "--run-report")
    assert code == 1 and "pgvector is unreachable, nothing changed" in err
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", settings.pg_dsn)
    assert settings.serving_file.read_bytes() == pinned  # no refusal wrote anything

    code, _, _ = run("rollback", "--reason", "incident 2")
    assert code == 0 and (state().state, state().reason) == (PINNED, "incident 2")
    code, out, _ = run("promote", "--reason", "fixed", "--run-report", "--by", "alice")
    assert code == 0 and (state().state, state().actor) == (PROMOTED, "alice")

    def degrade(window_id: str) -> None:
        window = Window("shadow_parity", window_id, ("shadow_agreement",), "overlap 0.4")
        watch(Settings.from_env(), window, "dagster:shadow_parity", settings.pg_dsn)
        assert state().state == DEGRADED

    degrade("w1")
    code, out, _ = run("status")
    assert code == 0 and "pgvector DEGRADED since" in out and "auto-rollback is off" in out
    code, out, _ = run("promote", "--reason", "looked: acceptable", "--run-report")
    assert code == 0 and (state().state, state().failing) == (PROMOTED, {})  # re-armed
    degrade("w2")
    code, out, _ = run("rollback", "--reason", "degraded: roll back", "--by", "bob")
    assert code == 0 and state().state == PINNED
    code, out, _ = run("promote", "--reason", "fixed again", "--run-report")
    assert code == 0 and state().state == PROMOTED

    settings.serving_file.unlink()  # a never-promoted deployment
    code, _, _ = run("rollback", "--reason", "pin before anything happens")
    assert code == 0 and state().state == PINNED
    assert pending_entries(settings.serving_pending_file) == []  # Postgres took every change


def test_fetch_pubmed_is_dispatched_like_every_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    # invalid input is refused before any request: no network needed to see the dispatch
    args = ["fetch-pubmed", "--query", "SOD1", "--since", "2025-01-01", "--batch-size", "0"]
    assert candlefire(args) == 2
    assert "batch_size must be 1..10000" in capsys.readouterr().err
    assert not (tmp_path / "drops").exists()
