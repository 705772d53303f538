"""Security: a password in the Postgres DSN never reaches logs, metadata, files or errors."""

from __future__ import annotations

import logging
import traceback
import uuid

import dagster as dg
import psycopg
import pytest

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, materialized, pipeline_env
from candlefire_pipeline_tests.reliability.helpers import files_containing, with_password

SECRET = f"Pw-{uuid.uuid4().hex}-secret"


def _unreachable_dsns() -> dict[str, str]:
    port = procs.free_port()  # nothing listens there
    return {
        "uri, refused port": f"postgresql://cf_user:{SECRET}@127.0.0.1:{port}/candlefire",
        "key=value, refused port": f"host=127.0.0.1 port={port} user=u password={SECRET}",
        "missing socket dir": f"host=/nonexistent/pg user=u password={SECRET} dbname=x",
        "invalid port number": f"postgresql://u:{SECRET}@127.0.0.1:99999/db",
        "bad sslmode": f"postgresql://u:{SECRET}@127.0.0.1:{port}/db?sslmode=bogus",
        "unparsable uri": f"postgresql://u:{SECRET}@[::1/db",
        "unparsable key=value": f"host=127.0.0.1 password='{SECRET}",
    }


UNREACHABLE = _unreachable_dsns()


def _rendered(exc: BaseException) -> str:
    """Everything a log handler or Dagster shows of an exception (suppressed context excluded)."""
    return "".join(traceback.format_exception(exc)) + repr(exc)


def _chain(exc: BaseException | None) -> list[BaseException]:
    """The exception and every cause or context, suppressed or not (what a debugger reaches)."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


@pytest.fixture
def secret_db(pg_server):
    """A login role WITH PASSWORD owning a database of its own; its DSN carries the password.

    The embedded server trusts its Unix socket, so the password is not checked, but it is in the
    DSN that every layer receives, which is what this test is about.
    """
    suffix = uuid.uuid4().hex[:10]
    role, database = f"cf_secret_{suffix}", f"cf_secret_{suffix}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{SECRET}'")
        admin.execute(f"CREATE DATABASE {database} OWNER {role}")
    with psycopg.connect(pg_server.dsn, dbname=database, autocommit=True) as admin:
        for extension in ("vector", "pg_trgm"):  # not trusted: a superuser installs them
            admin.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    try:
        yield with_password(pg_server.dsn, SECRET, user=role, dbname=database)
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def _dagster_record(instance: dg.DagsterInstance, results) -> str:
    """Every event, run config and asset metadata Dagster stored for these runs, serialized."""
    parts = []
    for result in results:
        run = instance.get_run_by_id(result.run_id)
        parts.append(dg.serialize_value(run))
        parts += [dg.serialize_value(entry) for entry in instance.all_logs(result.run_id)]
        parts += [dg.serialize_value(event) for event in result.all_events]
    return "\n".join(parts)


@pytest.mark.parametrize("case", sorted(UNREACHABLE))
def test_connection_errors_never_show_the_password(case, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailableError) as caught:
        PgVectorBackend(UNREACHABLE[case])
    assert "Postgres" in str(caught.value)
    assert SECRET not in _rendered(caught.value)
    assert SECRET not in caplog.text


def test_no_exception_in_the_chain_holds_the_password():
    with pytest.raises(BackendUnavailableError) as caught:
        PgVectorBackend(UNREACHABLE["unparsable uri"])
    assert not [e for e in _chain(caught.value) if SECRET in str(e)]


def test_status_cli_fails_loudly_without_the_password(tmp_path, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    for case, dsn in UNREACHABLE.items():
        monkeypatch.setenv("CANDLEFIRE_PG_DSN", dsn)
        assert candlefire(["status"]) != 0, case
        out, err = capsys.readouterr()
        assert "pgvector: UNREACHABLE" in out, case
        assert SECRET not in out + err, case
    assert SECRET not in caplog.text
    assert not files_containing(tmp_path, SECRET)


def test_failed_materialization_records_no_password(tmp_path, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    settings = pipeline_env(monkeypatch, tmp_path / "data", UNREACHABLE["uri, refused port"])
    drop = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = Pipeline(instance).ingest(drop, raise_on_error=False)
        record = _dagster_record(instance, [result])
    assert not result.success and not materialized(result, "pgvector_chunks")
    assert materialized(result, "chroma_chunks")  # the other store is unaffected
    assert "cannot connect to Postgres at postgresql://127.0.0.1" in record
    out, err = capsys.readouterr()
    for text in (record, out, err, caplog.text):
        assert SECRET not in text
    assert not files_containing(tmp_path, SECRET)  # event log db, compute logs, parquet, json


def test_successful_run_flip_and_cli_with_a_password_dsn(
    secret_db, tmp_path, monkeypatch, capsys, caplog
):
    caplog.set_level(logging.DEBUG)
    settings = pipeline_env(monkeypatch, tmp_path / "data", secret_db)
    drop = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        ingest = pipeline.ingest(drop)
        parity = pipeline.parity()
        record = _dagster_record(instance, [ingest, parity])
    assert ingest.success and parity.success
    assert materialized(parity, "serving_backend")  # the flip wrote history with this DSN
    assert candlefire(["status"]) == 0
    assert candlefire(["rollback", "--reason", "secret test"]) == 0
    out, err = capsys.readouterr()
    assert "pgvector:" in out and "UNREACHABLE" not in out
    for text in (record, out, err, caplog.text):
        assert SECRET not in text
    assert not files_containing(tmp_path, SECRET)
