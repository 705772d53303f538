"""End to end with the daemon: a new drop file is ingested into every store with no manual step."""

import json
import os
from pathlib import Path

import dagster as dg
import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.ui.dagster_dev import running_dagster_dev

REPO_ROOT = Path(__file__).resolve().parents[2]
STORES = ("pgvector_chunks", "chroma_chunks", "qdrant_chunks")


def _materialized_partitions(home: Path, asset: str) -> set[str]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.get_materialized_partitions(dg.AssetKey(asset))


@pytest.mark.slow
def test_sensor_ingests_a_new_drop_through_the_daemon(monkeypatch):
    with procs.scratch_dir("sensor") as root:
        home, data = root / "home", root / "data"
        home.mkdir()
        monkeypatch.setenv("DAGSTER_HOME", str(home))  # dagster.yaml roots storage there
        config = procs.instance_yaml((REPO_ROOT / "dagster.yaml").read_text())
        (home / "dagster.yaml").write_text(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CANDLEFIRE_")}
        env.update(
            CANDLEFIRE_DATA_DIR=str(data),
            CANDLEFIRE_EMBED_MODEL="hashing-v1",
            CANDLEFIRE_SENSOR_INTERVAL="2",
        )
        try:
            with running_dagster_dev(
                ["-m", "candlefire_pipeline.definitions"],
                home=home,
                env=env,
                log_path=root / "dagster_dev.log",
                cwd=root,
            ) as dev:
                dev.wait_until_loaded()
                (data / "drops").mkdir(parents=True)
                drop = data / "drops" / "0001-live.jsonl"
                records = [
                    {"pmid": "501", "title": "SPG302 in ALS", "abstract": "SPG302 restores."},
                    {"pmid": "502", "title": "TDP-43", "abstract": "TDP-43 aggregates."},
                ]
                drop.write_text("".join(json.dumps(r) + "\n" for r in records))

                def ingested() -> bool:
                    return all(
                        "0001-live.jsonl" in _materialized_partitions(home, a) for a in STORES
                    )

                procs.wait_until(
                    ingested,
                    proc=dev.proc,
                    log_path=dev.log_path,
                    what="the sensor's ingest run",
                    limit_s=420,
                )
            with dg.DagsterInstance.from_config(str(home)) as instance:
                runs = instance.get_runs(dg.RunsFilter(job_name="ingest_job"))
                assert [r.tags.get("dagster/partition") for r in runs] == ["0001-live.jsonl"]
                assert runs[0].tags.get("dagster/sensor_name") == "pubmed_drops_sensor"
            for store in ("chroma", "qdrant"):
                assert (data / "batches" / "0001-live.jsonl" / f"applied-{store}.json").exists()
        finally:
            EmbeddedPostgres(data / "pg").stop()
