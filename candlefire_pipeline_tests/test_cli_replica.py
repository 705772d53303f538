"""`candlefire replica`: made from the embedded primary, its status against the switch's last
change (exit 1 while it has not replayed it), every refusal one line."""

from __future__ import annotations

import psycopg
import pytest

from candlefire_pipeline.backends.pg.replica import EmbeddedReplica
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations.serving.machine import ROLLBACK, transition
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.replicas import caught_up, set_replay

pytestmark = pytest.mark.server  # starts an embedded primary and its replica


@pytest.fixture
def data_dir(monkeypatch):
    with pg_data_root() as root:
        monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(root / "data"))
        for name in ("CANDLEFIRE_PG_DSN", "CANDLEFIRE_PG_READ_DSN"):
            monkeypatch.delenv(name, raising=False)
        settings = Settings.from_env()
        try:
            yield settings
        finally:
            EmbeddedReplica(EmbeddedPostgres(settings.pg_data_dir), settings.pg_replica_dir).stop()
            EmbeddedPostgres(settings.pg_data_dir).stop()


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = candlefire(["replica", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_create_status_while_lagging_and_remove(data_dir, capsys, monkeypatch):
    settings = data_dir
    code, out, _ = run(capsys, "status")
    assert code == 0 and "CANDLEFIRE_PG_READ_DSN is not set" in out
    code, out, _ = run(capsys, "create")
    assert code == 0 and "replica made and started" in out
    replica = EmbeddedReplica(EmbeddedPostgres(settings.pg_data_dir), settings.pg_replica_dir)
    monkeypatch.setenv("CANDLEFIRE_PG_READ_DSN", replica.dsn)
    primary = replica.primary.dsn

    transition(settings, ROLLBACK, "a change with a WAL position", "tester", dsn=primary)
    caught_up(replica)
    code, out, _ = run(capsys, "status")
    assert code == 0 and "replica: running, streaming" in out
    assert "switch's last change at" in out and ": replayed" in out

    set_replay(replica, paused=True)
    try:
        with psycopg.connect(primary, autocommit=True) as conn:  # e.g. a generation's table
            conn.execute("CREATE TABLE built_while_paused (x int)")
        transition(settings, ROLLBACK, "after a table the replica lacks", "tester", dsn=primary)
        code, out, _ = run(capsys, "status")
        assert code == 1 and "NOT replayed yet" in out and "replay PAUSED" in out, out
    finally:
        set_replay(replica, paused=False)

    code, _, err = run(capsys, "create")
    assert code == 2 and "already holds a replica" in err and err.count("\n") == 1
    code, out, _ = run(capsys, "remove")
    assert code == 0 and not settings.pg_replica_dir.exists()


def test_an_external_postgres_is_refused_in_one_line(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", "postgresql://app:s3cret@db.example:5432/candlefire")
    code, _, err = run(capsys, "create")
    assert code == 2 and "external Postgres" in err and err.count("\n") == 1
    assert "s3cret" not in err
