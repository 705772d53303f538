"""app_collection_adoption materialized as Dagster runs it: the report's figures as metadata, the
import behind its config, a bad collection a failed run that names it."""

from __future__ import annotations

import dagster as dg
import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.defs.adoption_assets import app_collection_adoption
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.adoption import scenario
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.operations.batches import EMBEDDER


@pytest.fixture
def configured(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model=EMBEDDER.model_id)
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")
    app = scenario.build_app_folder(tmp_path / "app")
    monkeypatch.setenv("CANDLEFIRE_APP_CHROMA_PATH", str(app))
    yield Settings.from_env(), app
    with opened_backend("pgvector", settings) as store:
        store.reset()


def materialize(tmp_path, settings, import_rows: bool, raise_on_error: bool = True):
    config = {"ops": {"app_collection_adoption": {"config": {"import_rows": import_rows}}}}
    with dg.instance_for_test() as instance:
        result = dg.materialize([app_collection_adoption], instance=instance, run_config=config,
                                resources=build_resources(settings),
                                raise_on_error=raise_on_error)  # fmt: skip
        events = result.asset_materializations_for_node("app_collection_adoption")
        return result, (events[0].metadata if events else {})


def test_the_report_then_the_import_as_asset_metadata(configured, tmp_path):
    settings, app = configured
    before = scenario.folder_checksum(app)
    _, metadata = materialize(tmp_path, settings, import_rows=False)
    assert metadata["rows"].value == 10 and metadata["chunks_only_in_app"].value == 10
    assert metadata["imported"].value == "not imported"
    assert "| only_in_app | 10 |" in metadata["classes"].value
    assert metadata["model_check"].value.startswith("mixed: 9 of 10")
    _, metadata = materialize(tmp_path, settings, import_rows=True)
    assert metadata["imported"].value.startswith("imported (10 rows, 7 papers in 1 parts")
    with opened_backend("pgvector", settings) as store:
        assert store.count() == 10
    assert scenario.folder_checksum(app) == before


def test_a_collection_that_cannot_be_read_fails_the_run_by_name(configured, tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_APP_COLLECTION", "missing_papers")
    result, _ = materialize(tmp_path, Settings.from_env(), import_rows=True, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "has no collection 'missing_papers'" in str(failure.event_specific_data.error)


def test_without_an_app_collection_the_asset_says_so(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    _, metadata = materialize(tmp_path, settings, import_rows=False)
    assert metadata["configured"].value is False
