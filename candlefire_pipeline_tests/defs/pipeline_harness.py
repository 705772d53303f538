"""Runs the real assets, checks and resources in-process against a temp data dir."""

import uuid
from pathlib import Path

import dagster as dg

from candlefire_pipeline.defs.ingest_assets import chunks, embeddings, papers
from candlefire_pipeline.defs.parity_assets import parity_report, serving_backend
from candlefire_pipeline.defs.parity_checks import parity_checks
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.defs.store_assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.store_checks import build_store_checks
from candlefire_pipeline.settings import Settings

INGEST = [papers, chunks, embeddings, pgvector_chunks, chroma_chunks, *build_store_checks()]
PARITY = [parity_report, serving_backend, *parity_checks]


def pipeline_env(monkeypatch, data_dir: Path, pg_dsn: str, model: str = "hashing-v1") -> Settings:
    """Point every setting at a fresh data dir, a fresh pg table and the given embedder."""
    env = {
        "CANDLEFIRE_DATA_DIR": str(data_dir),
        "CANDLEFIRE_PG_DSN": pg_dsn,
        "CANDLEFIRE_PG_TABLE": f"chunks_{uuid.uuid4().hex[:10]}",
        "CANDLEFIRE_EMBED_MODEL": model,
        # latency is a machine property, not a behaviour: tests never gate on wall-clock time
        "CANDLEFIRE_PARITY_P95_RATIO": "1000",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    settings.drops_dir.mkdir(parents=True, exist_ok=True)
    return settings


class Pipeline:
    """One Dagster test instance; materializes batches and the parity/serving assets."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance

    def ingest(self, key: str, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        self.instance.add_dynamic_partitions(ingest_batches.name, [key])
        return dg.materialize(
            INGEST,
            instance=self.instance,
            resources=build_resources(Settings.from_env()),
            partition_key=key,
            raise_on_error=raise_on_error,
        )

    def ingest_range(
        self, first: str, last: str, raise_on_error: bool = True
    ) -> dg.ExecuteInProcessResult:
        """One run over the registered partitions first..last, like a backfill run."""
        return dg.materialize(
            INGEST,
            instance=self.instance,
            resources=build_resources(Settings.from_env()),
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            },
            raise_on_error=raise_on_error,
        )

    def parity(self, raise_on_error: bool = False) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            PARITY,
            instance=self.instance,
            resources=build_resources(Settings.from_env()),
            raise_on_error=raise_on_error,
            selection=[parity_report, serving_backend],
        )


def materialized(result: dg.ExecuteInProcessResult, asset: str) -> bool:
    keys = {e.asset_key for e in result.get_asset_materialization_events()}
    return dg.AssetKey(asset) in keys


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    for event in result.get_asset_materialization_events():
        if event.asset_key == dg.AssetKey(asset):
            return {k: v.value for k, v in event.materialization.metadata.items()}
    raise KeyError(asset)


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
