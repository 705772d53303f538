"""Runs the real assets, checks and resources in-process against a temp data dir."""

import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from candlefire_pipeline.defs.ingest_assets import chunks, embeddings, papers
from candlefire_pipeline.defs.parity_assets import parity_report, serving_backend
from candlefire_pipeline.defs.parity_checks import parity_checks
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.resources import PgVectorResource, build_resources
from candlefire_pipeline.defs.stores.assets import store_assets
from candlefire_pipeline.defs.stores.checks import build_store_checks
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests.latency import ignore_machine_latency

#: Every known store, whatever CANDLEFIRE_STORES says: the tests always cover all of them.
INGEST = [papers, chunks, embeddings, *store_assets(STORE_NAMES), *build_store_checks(STORE_NAMES)]
PARITY = [parity_report, serving_backend, *parity_checks]


def pipeline_env(
    monkeypatch, data_dir: Path, pg_dsn: str, model: str = "hashing-v1", latency_gate: bool = False
) -> Settings:
    """Point every setting at a fresh data dir, a fresh pg table and the given embedder.

    The p95 gate is measured and reported but lets any ratio pass (ignore_machine_latency)
    unless `latency_gate`: on a shared machine the ratio of two stores' timings says how busy
    the machine was, so a test about anything else must not hang on it. Only the tests of that
    gate turn it on (test_flip's genuinely slower pgvector)."""
    if not latency_gate:
        ignore_machine_latency(monkeypatch)
    env = {
        "CANDLEFIRE_DATA_DIR": str(data_dir),
        "CANDLEFIRE_PG_DSN": pg_dsn,
        "CANDLEFIRE_PG_TABLE": f"chunks_{uuid.uuid4().hex[:10]}",
        "CANDLEFIRE_EMBED_MODEL": model,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    settings.drops_dir.mkdir(parents=True, exist_ok=True)
    return settings


def demo_deployment(monkeypatch, tmp: Path, pg_dsn: str):
    """The first demo drop in every store and one parity report that passes every gate;
    (settings, query embedder)."""
    from candlefire_pipeline.corpus.demo import write_demo_drops
    from candlefire_pipeline.embedding import load_embedder
    from candlefire_pipeline.operations.parity import open_named_stores, run_report
    from candlefire_pipeline.parity.report.files import write_report

    settings = pipeline_env(monkeypatch, tmp / "data", pg_dsn)
    first = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp)) as instance:
        assert Pipeline(instance).ingest(first).success
    embedder = load_embedder(settings.model_id)
    with open_named_stores(settings) as stores:
        write_report(run_report(settings, embedder, stores), settings.reports_dir)
    return settings, embedder


@contextmanager
def demo_pipeline(monkeypatch, tmp: Path, pg_dsn: str):
    """(settings, a Pipeline on a test instance, the three demo drops' keys), nothing ingested."""
    from candlefire_pipeline.corpus.demo import write_demo_drops

    settings = pipeline_env(monkeypatch, tmp / "data", pg_dsn)
    keys = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp)) as instance:
        yield settings, Pipeline(instance), keys


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

    def stage(self, key: str) -> dg.ExecuteInProcessResult:
        """papers, chunks and embeddings of a batch, not yet applied to any store."""
        self.instance.add_dynamic_partitions(ingest_batches.name, [key])
        return dg.materialize(
            [papers, chunks, embeddings],
            instance=self.instance,
            resources=build_resources(Settings.from_env()),
            partition_key=key,
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

    def parity(
        self,
        raise_on_error: bool = False,
        selection: list[str] | None = None,
        slow_pgvector_s: float | None = None,
        overrides: dict[str, dg.ConfigurableResource] | None = None,
    ) -> dg.ExecuteInProcessResult:
        """parity_report (+ its blocking checks) and serving_backend, as parity_job runs them.

        slow_pgvector_s adds that much latency to each of pgvector's read calls; overrides
        replaces resources by key (e.g. a broken store).
        """
        resources = build_resources(Settings.from_env())
        if slow_pgvector_s is not None:
            resources["pgvector"] = SlowPgVectorResource(delay_s=slow_pgvector_s)
        resources.update(overrides or {})
        return dg.materialize(
            PARITY,
            instance=self.instance,
            resources=resources,
            raise_on_error=raise_on_error,
            selection=selection or ["parity_report", "serving_backend"],
        )

    def serving_only(self) -> dg.ExecuteInProcessResult:
        """serving_backend on its own, on whatever report is on disk (a re-run from the UI)."""
        return self.parity(raise_on_error=True, selection=["serving_backend"])

    def scheduled_parity_run(self) -> dg.ExecuteInProcessResult:
        """What the nightly parity_refresh_schedule starts: its run request, executed as the
        code location's parity_job."""
        from candlefire_pipeline.definitions import defs

        schedule = defs.resolve_schedule_def("parity_refresh_schedule")
        context = dg.build_schedule_context(instance=self.instance)
        [request] = schedule.evaluate_tick(context).run_requests
        job = defs.resolve_job_def(schedule.job_name)
        return job.execute_in_process(
            instance=self.instance, run_config=request.run_config, tags=request.tags,
            raise_on_error=False,
        )  # fmt: skip


class SlowReads:
    """A backend whose read calls take 4x as long plus `delay_s`: a genuinely slower store.

    The multiple keeps it slower than the other store however loaded the machine is (both
    stores' own times grow together); the fixed part makes the gap large on an idle one.
    """

    SLOWED = ("semantic_candidates", "substring_candidates", "contains", "fetch")

    def __init__(self, backend, delay_s: float) -> None:
        self._backend, self._delay_s = backend, delay_s

    def __getattr__(self, name: str):
        attribute = getattr(self._backend, name)
        if name not in self.SLOWED:
            return attribute

        def slowed(*args, **kwargs):
            started = time.perf_counter()
            result = attribute(*args, **kwargs)
            time.sleep(self._delay_s + 3 * (time.perf_counter() - started))
            return result

        return slowed


class SlowPgVectorResource(PgVectorResource):
    delay_s: float = 0.05

    @contextmanager
    def open(self):
        with super().open() as backend:
            yield SlowReads(backend, self.delay_s)


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
