"""Declarative automation: parity refreshes after new store partitions, gated by the checks."""

import json

import dagster as dg
import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.definitions import defs
from candlefire_pipeline.defs.parity_assets import parity_report, serving_backend
from candlefire_pipeline.defs.parity_checks import parity_checks
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.defs.stores.assets import chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.stores.checks import stores_agree
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, pipeline_env
from candlefire_pipeline_tests.latency import ignore_machine_latency

PARITY, SERVING = dg.AssetKey("parity_report"), dg.AssetKey("serving_backend")


def _drop(settings: Settings, name: str, pmids: list[str]) -> str:
    records = [{"pmid": p, "title": f"paper {p}", "abstract": f"SOD1 study {p}."} for p in pmids]
    (settings.drops_dir / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return name


class Ticks:
    """The automation sensor's ticks, one evaluation at a time, against one instance."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance, self.cursor = instance, None

    def requested(self) -> set[dg.AssetKey]:
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        return {key for key in (PARITY, SERVING) if result.get_num_requested(key)}


@pytest.fixture
def settings(tmp_path, monkeypatch, pg_dsn) -> Settings:
    return pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)


def test_parity_refreshes_once_after_new_store_partitions_and_not_on_a_failed_check(settings):
    with dg.instance_for_test() as instance:
        ticks, pipeline = Ticks(instance), Pipeline(instance)
        assert ticks.requested() == set()  # vacuous: nothing ingested yet
        assert pipeline.ingest(_drop(settings, "0001-a.jsonl", ["801", "802"])).success
        assert ticks.requested() == {PARITY}
        assert ticks.requested() == set()  # handled: no second refresh for the same partitions

        assert pipeline.ingest(_drop(settings, "0002-b.jsonl", ["803"])).success
        chroma = open_backend("chroma", settings)
        try:
            chroma.delete_papers(["803"])  # the stores disagree now
        finally:
            chroma.close()
        check = dg.materialize(
            [pgvector_chunks, chroma_chunks, stores_agree],
            selection=dg.AssetSelection.checks(stores_agree),
            instance=instance,
            resources=build_resources(Settings.from_env()),
            raise_on_error=False,
        )
        assert [e.passed for e in check.get_asset_check_evaluations()] == [False]
        assert ticks.requested() == set()  # a failed blocking check holds the refresh

        assert pipeline.ingest("0002-b.jsonl").success  # re-ingest repairs Chroma
        assert ticks.requested() == {PARITY}


def _parity_report_with_its_checks(instance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [parity_report, serving_backend, *parity_checks],
        instance=instance,
        resources=build_resources(Settings.from_env()),
        selection=dg.AssetSelection.assets(parity_report),
        raise_on_error=False,
    )


def test_the_serving_decision_follows_a_fresh_report_only_when_its_gates_passed(
    settings, monkeypatch
):
    ignore_machine_latency(monkeypatch)  # latency is a machine property
    first = write_demo_drops(settings.drops_dir)[0].name  # enough evidence for every gate
    with dg.instance_for_test() as instance:
        assert Pipeline(instance).ingest(first).success
        ticks = Ticks(instance)
        assert ticks.requested() == set()
        assert _parity_report_with_its_checks(instance).success
        assert ticks.requested() == {SERVING}
        assert ticks.requested() == set()
        monkeypatch.setenv("CANDLEFIRE_PARITY_MIN_CHUNKS", "1000000")  # corpus_size fails
        failed = _parity_report_with_its_checks(instance)
        assert not all(e.passed for e in failed.get_asset_check_evaluations())
        assert ticks.requested() == set()  # a failed gate holds the decision


def test_nothing_new_after_the_first_evaluation_requests_nothing(settings):
    with dg.instance_for_test() as instance:
        assert Pipeline(instance).ingest(_drop(settings, "0001-a.jsonl", ["811"])).success
        ticks = Ticks(instance)
        # the sensor starts after the ingest (make demo, then make ui): no refresh on start
        assert ticks.requested() == set()
        assert ticks.requested() == set()
