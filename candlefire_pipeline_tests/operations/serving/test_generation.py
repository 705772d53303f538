"""Serving an index generation, on the real stores through the operator's commands: promote on
a comparison, the reader following, rollback to the recorded target (also with Postgres down),
the schedule against a pin, every refusal with its reason, and gc around what serves."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import psycopg
import pytest

from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.defs.generations.parity import (
    generation_gate_checks,
    generation_parity_report,
)
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.compare import run_comparison
from candlefire_pipeline.operations.generations.gc import apply_gc, plan_gc
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.commands import Order, rollback
from candlefire_pipeline.operations.serving.history import history, pending_entries
from candlefire_pipeline.operations.serving.machine import (
    DEGRADED,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    Target,
    read_state,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata
from candlefire_pipeline_tests.generations.deployment import build, deploy, drop_tables
from candlefire_pipeline_tests.latency import ignore_machine_latency

QUERY = ("SPG302 restores synapses in ALS", ["TDP-43"], ["SPG302"])
CHROMA, DEFAULT_PG = Target("chroma", "default"), Target("pgvector", "default")


@pytest.fixture
def deployment(tmp_path, monkeypatch, pg_dsn):
    ignore_machine_latency(monkeypatch)  # a property of this shared machine, not of the index
    settings = deploy(monkeypatch, tmp_path, pg_dsn)
    yield settings
    drop_tables(settings)


def built(settings: Settings, name: str, model: str = "hashing-v1", **options):
    generation = create_generation(settings, name, model, **options)
    build(settings, generation)
    return generation


def command(capsys, *args: str) -> tuple[int, str, str]:
    code = candlefire(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def compare(capsys, name: str) -> None:
    code, out, _ = command(capsys, "generation", "compare", name)
    assert code == 0, out


def promote(capsys, name: str) -> tuple[int, str, str]:
    return command(capsys, "promote", "--generation", name, "--reason", f"serve {name}",
                   "--by", "oncall")  # fmt: skip


def serving(settings: Settings) -> tuple[str, Target, Target]:
    state = read_state(settings.serving_file)
    return state.state, state.target, state.rollback_target


def test_promote_a_generation_then_roll_back_and_the_schedule_keeps_the_pin(
    deployment, tmp_path, capsys
):
    settings = deployment
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.parity().success  # passing report: the default flips to pgvector
        assert serving(settings)[:2] == (PROMOTED, DEFAULT_PG)
        dim48 = built(settings, "dim48", "hashing-v1:48")
        compare(capsys, "dim48")
        reader = ServingReader(settings, embedder_for(settings, "query"))
        with reader:
            before = reader.retriever().retrieve(*QUERY).pmids
            assert reader.generation == "default" and before

            code, out, _ = promote(capsys, "dim48")
            assert code == 0 and "pgvector/dim48 (promoted on report" in out
            state = read_state(settings.serving_file)
            assert (state.target, state.previous) == (Target("pgvector", "dim48"), DEFAULT_PG)
            retriever = reader.retriever()
            assert isinstance(retriever.backend, PgVectorBackend)
            assert retriever.backend.names.table == generation_settings(settings, dim48).pg_table
            assert reader.generation == "dim48" and retriever.embedder.dim == 48
            assert retriever.retrieve(*QUERY).pmids  # its own query vectors find its chunks
            assert stored_registry(settings).get("dim48").last_served_at
            forced = replace(settings, serving_override="chroma")  # the emergency lever
            with ServingReader(forced, embedder_for(settings, "query")) as lever:
                assert isinstance(lever.retriever().backend, ChromaBackend)
                assert lever.generation == "default"

            code, out, _ = command(capsys, "rollback", "--reason", "drill", "--by", "oncall")
            assert code == 0 and "pgvector (PINNED by oncall" in out
            assert serving(settings) == (PINNED_PGVECTOR, DEFAULT_PG, CHROMA)
            retriever = reader.retriever()
            assert reader.generation == "default" and retriever.embedder.dim == 64
            assert retriever.backend.names.table == settings.pg_table
            assert retriever.retrieve(*QUERY).pmids == before

            # the next scheduled parity run passes every gate and still leaves the pin alone
            run = pipeline.scheduled_parity_run()
            meta = metadata(run, "serving_backend")
            assert meta["decision"] == "refused" and "pinned" in meta["verdict"]
            assert serving(settings)[:2] == (PINNED_PGVECTOR, DEFAULT_PG)
            assert reader.retriever() is retriever  # the switch did not change

            # a second rollback ends on Chroma, as before generations
            back = rollback(settings, Order("rollback", "further back", "oncall"))
            assert back.state.target == CHROMA
            assert isinstance(reader.retriever().backend, ChromaBackend)
    rows = [(r["state"], r["generation"], r["previous"]) for r in history(settings.pg_dsn)]
    assert rows[:3] == [
        (PINNED, "default", None),
        (PINNED_PGVECTOR, "default", "chroma/default"),
        (PROMOTED, "dim48", "pgvector/default"),
    ]


def test_promote_is_refused_with_its_reason_until_the_evidence_holds(deployment, capsys):
    settings = deployment
    code, _, err = promote(capsys, "dim48")  # no generation at all: the vacuous case
    assert code == 1 and "no generation named 'dim48'; known: default" in err
    assert not settings.serving_file.exists()

    built(settings, "dim48", "hashing-v1:48")
    code, _, err = promote(capsys, "dim48")
    assert code == 1 and "run `candlefire generation compare dim48`" in err

    built(settings, "tiny", "hashing-v1:2")  # a worse model fails on quality
    assert command(capsys, "generation", "compare", "tiny")[0] == 1
    code, _, err = promote(capsys, "tiny")
    assert code == 1 and "fails gates: rankings_hold" in err

    compare(capsys, "dim48")  # against chroma/default, which serves now
    built(settings, "half", layout=IndexLayout("halfvec"))
    compare(capsys, "half")
    assert promote(capsys, "half")[0] == 0
    assert serving(settings) == (PROMOTED, Target("pgvector", "half"), CHROMA)
    code, _, err = promote(capsys, "dim48")  # its comparison is against what served before
    assert code == 1 and "with chroma/default, but pgvector/half serves now" in err

    assert command(capsys, "rollback", "--reason", "drill")[0] == 0
    assert serving(settings)[:2] == (PINNED, CHROMA)
    code, _, err = promote(capsys, "dim48")  # chroma/default again, but before the pin
    assert code == 1 and "is not newer than the pin" in err and "new comparison" in err

    code, _, err = command(capsys, "promote", "--generation", "dim48", "--reason", "x",
                           "--backend", "chroma")  # fmt: skip
    assert code == 1 and "promoted to pgvector, not chroma" in err

    compare(capsys, "dim48")
    assert promote(capsys, "dim48")[0] == 0
    assert serving(settings) == (PROMOTED, Target("pgvector", "dim48"), CHROMA)


def test_gc_never_drops_what_serves_or_the_rollback_target(deployment, capsys, monkeypatch):
    settings = deployment
    built(settings, "half", layout=IndexLayout("halfvec"))
    built(settings, "dim48", "hashing-v1:48")
    built(settings, "spare", "hashing-v1:40")
    compare(capsys, "half")
    assert promote(capsys, "half")[0] == 0
    compare(capsys, "dim48")  # against pgvector/half
    assert promote(capsys, "dim48")[0] == 0
    assert serving(settings) == (PROMOTED, Target("pgvector", "dim48"), Target("pgvector", "half"))

    said: list[str] = []
    assert apply_gc(settings, plan_gc(settings, 0), said.append) == ["spare"]
    registry = stored_registry(settings)
    assert registry.get("half").live and registry.get("dim48").live

    # Postgres goes down: the rollback still returns at once to the recorded target, pinned
    dead = f"postgresql://cf:secret@127.0.0.1:{procs.free_port()}/candlefire"
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", dead)
    code, out, err = command(capsys, "rollback", "--reason", "postgres is down", "--by", "oncall")
    assert code == 0 and "queued locally" in err and "pgvector/half (PINNED" in out
    assert serving(settings) == (PINNED_PGVECTOR, Target("pgvector", "half"), CHROMA)
    [entry] = pending_entries(settings.serving_pending_file)
    assert (entry["generation"], entry["previous"]) == ("half", "chroma/default")
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", settings.pg_dsn)

    # dim48 neither serves nor is the rollback target any more: gc may drop it, never half
    assert apply_gc(settings, plan_gc(settings, 0), said.append) == ["dim48"]
    code, _, err = promote(capsys, "dim48")
    assert code == 1 and "generation dim48 is dropped, not live" in err
    assert stored_registry(settings).get("half").live


def _watched_report(settings: Settings, generation, instance) -> dict:
    """`<name>/parity_report` (+ its blocking checks) as the automation sensor runs it."""
    result = dg.materialize(
        [generation_parity_report(generation, settings.stores),
         *generation_gate_checks(generation)],
        instance=instance, resources=build_resources(Settings.from_env()), raise_on_error=False,
    )  # fmt: skip
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_serving_generation_is_watched_against_its_rollback_target(deployment, tmp_path, capsys):
    settings = deployment
    half = built(settings, "half", layout=IndexLayout("halfvec"))
    compare(capsys, "half")
    assert promote(capsys, "half")[0] == 0
    assert serving(settings) == (PROMOTED, Target("pgvector", "half"), CHROMA)
    report = run_comparison(settings, "half")  # what serves: judged against its rollback target
    sides = (report.target("reference"), report.target("candidate"))
    assert sides == (("chroma", "default"), ("pgvector", "half"))
    assert report.why.startswith("what serves against its rollback target (chroma/default)")

    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        meta = _watched_report(settings, half, instance)
        assert "pgvector/half" in meta["serving_watch"] and "healthy" in meta["serving_watch"]
        assert read_state(settings.serving_file).state == PROMOTED

        # rows vanish from the serving table behind the ledger's back: the next report degrades
        table = generation_settings(settings, half).pg_table
        with psycopg.connect(settings.pg_dsn, autocommit=True) as conn:
            conn.execute(f"DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} LIMIT 3)")
        meta = _watched_report(settings, half, instance)
        assert "SERVING DEGRADED" in meta["serving_watch"], meta["serving_watch"]
        assert "stores_hold_current_versions" in meta["failed_gates"]
        state = read_state(settings.serving_file)
        assert (state.state, state.target) == (DEGRADED, Target("pgvector", "half"))

        assert command(capsys, "rollback", "--reason", "half lost rows")[0] == 0
        assert serving(settings)[:2] == (PINNED, CHROMA)
        # half is a candidate again: its next report judges a promotion, the pin holds
        meta = _watched_report(settings, half, instance)
        assert "a candidate's comparison" in meta["serving_watch"]
        assert serving(settings)[:2] == (PINNED, CHROMA)
