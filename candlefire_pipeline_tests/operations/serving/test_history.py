"""Rollback never depends on Postgres: the switch is written first, the history row is queued
locally while Postgres is down and replayed once it answers (exactly once)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations.serving.commands import history_dsn
from candlefire_pipeline.operations.serving.history import history, pending_entries, queue_entry
from candlefire_pipeline.operations.serving.machine import (
    PINNED,
    PROMOTED,
    ServingState,
    read_state,
    sync_history,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.reliability.helpers import files_containing

SECRET = f"Pw-{uuid.uuid4().hex}-secret"


def _env(monkeypatch, data_dir, dsn: str | None) -> Settings:
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("CANDLEFIRE_PG_TABLE", f"chunks_{uuid.uuid4().hex[:10]}")
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1")
    if dsn is None:
        monkeypatch.delenv("CANDLEFIRE_PG_DSN", raising=False)
    else:
        monkeypatch.setenv("CANDLEFIRE_PG_DSN", dsn)
    settings = Settings.from_env()
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    promoted = ServingState(PROMOTED, "2026-01-01T00:00:00+00:00", "r-1", "setup", "test", "setup")
    settings.serving_file.write_text(promoted.to_json())
    return settings


def _rows(dsn: str, entry_id: str) -> list[dict]:
    return [h for h in history(dsn, limit=1000) if h["entry_id"] == entry_id]


def _rollback(capsys, reason: str) -> tuple[str, str]:
    assert candlefire(["rollback", "--reason", reason, "--by", "oncall"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "queued locally" in warnings[0], err
    assert warnings[0].endswith("replayed on the next successful connection")  # one line
    return out, err


def test_rollback_with_an_unreachable_external_postgres(tmp_path, monkeypatch, capsys, pg_dsn):
    dead = f"postgresql://cf:{SECRET}@127.0.0.1:{procs.free_port()}/candlefire"
    settings = _env(monkeypatch, tmp_path / "data", dead)
    out, err = _rollback(capsys, "pgvector is down")
    state = read_state(settings.serving_file)
    assert (state.state, state.backend, state.actor) == (PINNED, "chroma", "oncall")
    assert "serving backend: chroma" in out and SECRET not in out + err
    [entry] = pending_entries(settings.serving_pending_file)
    assert (entry["state"], entry["reason"], entry["report_id"]) == (
        PINNED,
        "pgvector is down",
        "r-1",
    )

    assert candlefire(["status"]) == 2  # pgvector unreachable, said plainly
    out = capsys.readouterr().out
    assert "history PENDING: 1 change(s)" in out and "PINNED by oncall" in out

    monkeypatch.setenv("CANDLEFIRE_PG_DSN", pg_dsn)  # Postgres answers again
    assert candlefire(["status"]) == 0
    assert "PENDING" not in capsys.readouterr().out
    [row] = _rows(pg_dsn, entry["entry_id"])
    assert (row["backend"], row["state"], row["actor"]) == ("chroma", PINNED, "oncall")
    assert row["changed_at"].isoformat() == state.changed_at  # when it happened, not replayed
    assert pending_entries(settings.serving_pending_file) == []
    assert not settings.serving_pending_file.exists()

    # a crash after the insert but before the queue was cleared: the replay adds nothing
    queue_entry(settings.serving_pending_file, entry)
    assert sync_history(settings, pg_dsn).inserted == 1
    assert len(_rows(pg_dsn, entry["entry_id"])) == 1
    assert not files_containing(tmp_path, SECRET)


def test_rollback_with_the_embedded_server_stopped_never_starts_it(monkeypatch, capsys):
    with pg_data_root() as root:
        server = EmbeddedPostgres(root / "data" / "pg")
        server.dsn  # noqa: B018 - a real embedded deployment, then the server goes down
        server.stop()
        try:
            settings = _env(monkeypatch, root / "data", None)
            assert history_dsn(settings) is None
            _rollback(capsys, "embedded Postgres is down")
            assert not server.is_running()  # the rollback did not start it
            assert read_state(settings.serving_file).state == PINNED
            [entry] = pending_entries(settings.serving_pending_file)

            dsn = EmbeddedPostgres(settings.pg_data_dir).dsn  # the server is back
            assert history_dsn(settings) == dsn
            assert candlefire(["status"]) == 0  # its connection replays the queue
            [row] = _rows(dsn, entry["entry_id"])
            assert row["reason"] == "embedded Postgres is down"
            assert pending_entries(settings.serving_pending_file) == []
        finally:
            EmbeddedPostgres(root / "data" / "pg").stop()


def test_a_history_table_that_refuses_writes_queues_too(tmp_path, monkeypatch, capsys, pg_dsn):
    role = f"cf_ro_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
    try:
        settings = _env(monkeypatch, tmp_path / "data", make_conninfo(pg_dsn, user=role))
        _rollback(capsys, "history is read-only")
        assert read_state(settings.serving_file).state == PINNED
        [entry] = pending_entries(settings.serving_pending_file)
        assert sync_history(settings, pg_dsn).inserted == 1  # the owner's connection replays it
        assert len(_rows(pg_dsn, entry["entry_id"])) == 1
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


def test_rollback_without_a_reason_is_refused_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    settings = _env(monkeypatch, tmp_path / "data", None)
    before = settings.serving_file.read_bytes()
    with pytest.raises(SystemExit):  # argparse: --reason is required
        candlefire(["rollback"])
    assert candlefire(["rollback", "--reason", "  "]) == 2
    assert "rollback needs a reason" in capsys.readouterr().err
    assert settings.serving_file.read_bytes() == before
    assert pending_entries(settings.serving_pending_file) == []


def test_an_entry_queued_before_generations_reads_as_the_default_generation(tmp_path, pg_dsn):
    """A queued entry (or a row) without `generation` served the default generation."""
    pending = tmp_path / "pending.jsonl"
    entry_id = uuid.uuid4().hex
    old = {"entry_id": entry_id, "backend": "pgvector", "state": PROMOTED, "event": "promote",
           "report_id": "r-old", "reason": "from before generations", "actor": "oncall",
           "changed_at": "2025-06-01T00:00:00+00:00"}  # fmt: skip
    queue_entry(pending, old)
    settings = Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops")
    settings.serving_pending_file.parent.mkdir(parents=True, exist_ok=True)
    pending.rename(settings.serving_pending_file)
    # the switch that change wrote (a queued change the switch never made is dropped)
    switch = ServingState(PROMOTED, old["changed_at"], "r-old", old["reason"], "oncall", "promote")
    settings.serving_file.write_text(switch.to_json())
    assert sync_history(settings, pg_dsn).inserted == 1
    [row] = _rows(pg_dsn, entry_id)
    assert (row["backend"], row["generation"], row["previous"]) == ("pgvector", "default", None)


@pytest.mark.parametrize("postgres", ["up", "down"])
def test_a_change_killed_before_its_switch_write_is_never_recorded(tmp_path, monkeypatch, pg_dsn,
                                                                   postgres):  # fmt: skip
    """A change is queued, then the switch written (found by the crash drill: the other order
    lost the row of a change the switch had made). A kill between the two leaves a queued change
    the switch never made: the next flush or change drops it, and the next change is recorded."""
    from candlefire_pipeline.operations.serving import machine
    from candlefire_pipeline.operations.serving.table import ROLLBACK

    dsn = pg_dsn if postgres == "up" else None
    settings = _env(monkeypatch, tmp_path / "data", dsn)
    before = read_state(settings.serving_file)
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(machine, "write_atomic", _killed)  # the kill after the queue write
        machine.transition(settings, ROLLBACK, "never written", "test", dsn=dsn)
    [unwritten] = pending_entries(settings.serving_pending_file)
    assert unwritten["reason"] == "never written" and read_state(settings.serving_file) == before
    if dsn is not None:
        assert sync_history(settings, dsn).inserted == 0
        assert pending_entries(settings.serving_pending_file) == []
        assert _rows(pg_dsn, unwritten["entry_id"]) == []
    outcome = machine.transition(settings, ROLLBACK, "written", "test", dsn=dsn)
    state = read_state(settings.serving_file)
    assert state.state == PINNED and state.reason == "written"
    queued = pending_entries(settings.serving_pending_file)
    if dsn is None:
        assert [e["reason"] for e in queued] == ["written"]
        assert queued[0]["changed_at"] == state.changed_at
    else:
        assert queued == [] and outcome.history.inserted == 1
        assert [h["reason"] for h in history(pg_dsn, limit=1000)
                if h["changed_at"].isoformat() == state.changed_at] == ["written"]  # fmt: skip


def _killed(*args, **kwargs):
    raise KeyboardInterrupt
