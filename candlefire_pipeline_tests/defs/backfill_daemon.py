"""`dagster dev` on a scratch instance for backfill tests: launch backfills over GraphQL the way
the UI does, wait for the daemon to finish them, read the runs and the stores afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.defs.stores.policies import STORE_POOLS
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.ui.dagster_dev import DagsterDev, running_dagster_dev

REPO_ROOT = Path(__file__).resolve().parents[2]
POOLS = tuple(STORE_POOLS[name] for name in STORE_NAMES)
INGEST_ASSETS = ["papers", "chunks", "embeddings", *(f"{name}_chunks" for name in STORE_NAMES)]
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
_LAUNCH = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}
"""
_STATUS = """
query($id: String!) {
  partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } }
}
"""
_STILL_RUNNING = {"REQUESTED", "CANCELING", "FAILING"}


class BackfillDaemon:
    """The project's dagster.yaml (queue limit overridable), hashing embedder, the test pg."""

    def __init__(self, root: Path, pg_dsn: str, per_run: int, max_concurrent_runs: int) -> None:
        self.root, self.home, self.data = root, root / "home", root / "data"
        self.home.mkdir(parents=True)
        config = procs.instance_yaml((REPO_ROOT / "dagster.yaml").read_text())
        if "max_concurrent_runs: 1" not in config:
            raise AssertionError("dagster.yaml no longer queues one run at a time")
        limit = f"max_concurrent_runs: {max_concurrent_runs}"
        (self.home / "dagster.yaml").write_text(config.replace("max_concurrent_runs: 1", limit))
        self.pg_dsn, self.table = pg_dsn, f"chunks_{uuid.uuid4().hex[:10]}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CANDLEFIRE_")}
        self.env.update(
            DAGSTER_HOME=str(self.home),
            CANDLEFIRE_DATA_DIR=str(self.data),
            CANDLEFIRE_PG_DSN=pg_dsn,
            CANDLEFIRE_PG_TABLE=self.table,
            CANDLEFIRE_EMBED_MODEL="hashing-v1",
            CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN=str(per_run),
        )

    @contextmanager
    def running(self) -> Iterator[DagsterDev]:
        """Drops registered with `candlefire register-drops`, then dagster dev, sensor off."""
        candlefire = Path(sys.executable).with_name("candlefire")
        register = [candlefire, "register-drops"]
        subprocess.run(register, env=self.env, check=True, capture_output=True)
        # dagster.yaml's default_limit is written to a pool on the first dequeue pass that sees
        # it, and that pass does not apply it yet: two runs queued together on a fresh instance
        # both start. Setting the limits first, as docs/DEPLOY.md tells operators, closes that.
        dagster = Path(sys.executable).with_name("dagster")
        for pool in POOLS:
            limit = [dagster, "instance", "concurrency", "set", pool, "1"]
            subprocess.run(limit, env=self.env, check=True, capture_output=True)
        target = ["-m", "candlefire_pipeline.definitions"]
        log_path = self.root / "dagster_dev.log"
        with running_dagster_dev(
            target, home=self.home, env=self.env, log_path=log_path, cwd=self.root
        ) as dev:
            dev.wait_until_loaded()
            dev.stop_sensor("pubmed_drops_sensor")  # only the backfills write here
            yield dev

    def backfill(
        self, dev: DagsterDev, keys: list[str], runs: int, assets: list[list[str]] | None = None
    ) -> str:
        """Launch an asset backfill (default: the ingest assets; else these key paths); return
        once its `runs` runs exist."""
        paths = assets or [[name] for name in INGEST_ASSETS]
        params = {
            "partitionNames": keys,
            "assetSelection": [{"path": path} for path in paths],
            "title": f"{keys[0]}..{keys[-1]}",
        }
        result = dev.graphql(_LAUNCH, {"params": params})["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise AssertionError(f"backfill not launched: {result}")
        backfill_id = result["backfillId"]
        procs.wait_until(
            lambda: len(self.runs(backfill_id)) >= runs,
            proc=dev.proc, log_path=dev.log_path, what=f"runs of backfill {backfill_id}",
            limit_s=600,
        )  # fmt: skip
        return backfill_id

    def wait_done(self, dev: DagsterDev, backfill_ids: list[str]) -> None:
        for backfill_id in backfill_ids:

            def done(b: str = backfill_id) -> bool:
                status = dev.graphql(_STATUS, {"id": b})["partitionBackfillOrError"]
                return status.get("status") not in _STILL_RUNNING

            procs.wait_until(
                done, proc=dev.proc, log_path=dev.log_path, what=f"backfill {backfill_id}",
                limit_s=1500,
            )  # fmt: skip

    def runs(self, backfill_id: str) -> list[dg.RunRecord]:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            return list(
                instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            )

    def enqueued(self, run_id: str) -> bool:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            return bool(instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED))

    def store_hashes(self) -> dict[str, dict[str, str]]:
        settings = Settings.from_env().with_data_dir(self.data)
        return store_hashes(replace(settings, pg_dsn=self.pg_dsn, pg_table=self.table))


def store_hashes(settings: Settings) -> dict[str, dict[str, str]]:
    """chunk id -> content hash of every store."""
    out = {}
    for name in STORE_NAMES:
        backend = open_backend(name, settings)
        try:
            out[name] = backend.chunk_hashes()
        finally:
            backend.close()
    return out
