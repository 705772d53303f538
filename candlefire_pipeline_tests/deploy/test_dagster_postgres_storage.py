"""deploy/dagster.yaml against a real Postgres: runs, events and the run queue live there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.settings import REPO_ROOT
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.deploy.conftest import standalone_postgres

pytestmark = pytest.mark.slow

DAGSTER = Path(sys.executable).with_name("dagster")
DEPLOY_YAML = REPO_ROOT / "deploy" / "dagster.yaml"

TINY_DEFS = """
import dagster as dg

letters = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=letters)
def tiny(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"partition": context.partition_key})


defs = dg.Definitions(assets=[tiny], executor=dg.in_process_executor)
"""


@pytest.fixture(scope="module")
def instance_db() -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A Postgres server of its own with an empty `dagster` database; (server, libpq URI)."""
    with standalone_postgres("dagster-pg") as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE dagster")
        yield server, server.dsn


@pytest.fixture(scope="module")
def instance_env(instance_db, tmp_path_factory) -> dict[str, str]:
    """DAGSTER_HOME holding deploy/dagster.yaml verbatim, and the env vars it reads."""
    _, dsn = instance_db
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(DEPLOY_YAML, home / "dagster.yaml")
    socket_dir = conninfo_to_dict(dsn)["host"]
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_USERNAME": "postgres",
        "DAGSTER_PG_PASSWORD": "",  # trust auth on the socket; managed Postgres sets a secret
        "DAGSTER_PG_HOST": "",  # empty host: libpq falls back to PGHOST, here the socket dir
        "PGHOST": socket_dir,
        "DAGSTER_PG_PORT": "5432",
        "DAGSTER_PG_DB": "dagster",
        "DAGSTER_MAX_CONCURRENT_RUNS": "3",
    }


def _dagster_db(dsn: str) -> psycopg.Connection:
    parts = conninfo_to_dict(dsn)
    return psycopg.connect(host=parts["host"], user="postgres", dbname="dagster")


@pytest.fixture(scope="module")
def cli_materialized(instance_env, tmp_path_factory) -> Path:
    """`dagster asset materialize` of partition "b" with the instance from deploy/dagster.yaml."""
    workdir = tmp_path_factory.mktemp("tiny")
    (workdir / "tiny_defs.py").write_text(TINY_DEFS)
    log_path = workdir / "materialize.log"
    with open(log_path, "wb") as log:
        done = subprocess.run(
            [DAGSTER, "asset", "materialize", "-f", "tiny_defs.py", "--select", "tiny",
             "--partition", "b"],
            env=instance_env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    assert done.returncode == 0, procs.log_tail(log_path)
    return log_path


def _use_instance_env(monkeypatch, instance_env: dict[str, str]) -> None:
    for key, value in instance_env.items():
        if key.startswith(("DAGSTER_", "PG")):
            monkeypatch.setenv(key, value)


def test_cli_run_is_recorded_in_postgres(instance_db, instance_env, cli_materialized):
    with _dagster_db(instance_db[1]) as conn:
        runs = conn.execute("SELECT status FROM runs").fetchall()
        materialized = conn.execute(
            "SELECT partition FROM event_logs"
            " WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND asset_key LIKE %s",
            ['%"tiny"%'],
        ).fetchall()
    assert runs == [("SUCCESS",)]
    assert materialized == [("b",)]
    # nothing fell back to the SQLite storages a bare DAGSTER_HOME would use
    assert not list(Path(instance_env["DAGSTER_HOME"]).rglob("*.db"))


def test_instance_reads_the_run_back(instance_db, instance_env, cli_materialized, monkeypatch):
    from dagster import DagsterInstance, DagsterRunStatus

    with _dagster_db(instance_db[1]) as conn:
        (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    _use_instance_env(monkeypatch, instance_env)
    with DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == DagsterRunStatus.SUCCESS
        assert run.tags["dagster/partition"] == "b"


def test_instance_queue_settings_come_from_the_env(instance_env, monkeypatch):
    from dagster import DagsterInstance
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage
    from dagster_postgres.schedule_storage import PostgresScheduleStorage

    _use_instance_env(monkeypatch, instance_env)
    with DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        queue = coordinator.get_run_queue_config()
        assert queue.max_concurrent_runs == 3  # DAGSTER_MAX_CONCURRENT_RUNS; the default is 10
        assert queue.tag_concurrency_limits == [
            {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
        ]
