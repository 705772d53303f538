"""The adoption report on an app collection built by candle-fire's indexing rules: every id in
exactly one class, the app's folder untouched, bounded pages."""

from __future__ import annotations

from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.adoption.classify import CLASSES
from candlefire_pipeline.operations.adoption.report import build_report, latest_report, reports_dir
from candlefire_pipeline_tests.adoption import scenario

EXPECTED = {
    "A1": "identical", "A2": "only_in_app", "A3": "only_in_app", "A4": "document_differs",
    "A5": "metadata_differs", "A6": "vector_differs", "A2_s0": "identical",
    "A2_s1": "identical", "A2_s2": "identical", "A7": "identical", "A8": "only_in_ledger",
    "A9": "only_in_ledger",
}  # fmt: skip


@pytest.fixture
def deployed(tmp_path):
    deployment = scenario.deployment(tmp_path, pg_dsn="postgresql://unused")
    scenario.write_drops(deployment.settings)
    return deployment


def classes_of(settings, report) -> dict[str, dict]:
    table = pq.read_table(reports_dir(settings) / report.report_id / "classes.parquet")
    return {row["chunk_id"]: row for row in table.to_pylist()}


@pytest.mark.parametrize("page_rows", [1000, 3])
def test_every_id_is_classified_and_the_apps_folder_is_untouched(deployed, page_rows):
    settings = replace(deployed.settings, app_collection=replace(
        deployed.settings.app_collection, page_rows=page_rows))  # fmt: skip
    before = scenario.folder_checksum(deployed.app_folder)
    report, staging = build_report(settings, embedder_for(settings, "bulk"))
    assert staging is None and scenario.folder_checksum(deployed.app_folder) == before
    found = classes_of(settings, report)
    assert {cid: row["class"] for cid, row in found.items()} == EXPECTED
    assert sum(report.counts.values()) == report.rows + report.counts["only_in_ledger"]
    assert report.rows == 10 and report.ledger["chunks"] == 10
    assert found["A2"]["detail"].startswith("replaced: the paper's current version is in drop-2a")
    assert "beside its paper's own section chunks" in found["A2"]["detail"]
    assert found["A3"]["detail"] == "deleted: deleted by drop-2b"
    assert found["A4"]["detail"].startswith("first differs at character 33: app ")
    assert "v2 abstract of A4, now about TD" in found["A4"]["detail"]
    assert found["A5"]["detail"] == "citation_count: app 1, ledger 9"
    assert found["A6"]["distance"] > 0.01 and found["A8"]["detail"] == "new in drop-2a"
    assert report.classes["stale_reasons"] == {"replaced": 1, "deleted": 1}
    assert report.classes["stale_papers"] == 1
    assert report.classes["metadata_keys"] == {"citation_count": 1}
    # A6 drifted: 9 of the 10 sampled vectors are the configured model's
    assert report.model["verdict"] == "mixed" and report.model["matching"] == 9
    assert latest_report(settings).report_id == report.report_id
    assert not list((settings.adoption_dir / "staging").glob("*.sqlite3"))


def test_a_ledger_without_drops_makes_every_app_row_stale(tmp_path):
    deployment = scenario.deployment(tmp_path, pg_dsn="postgresql://unused")
    report, _ = build_report(deployment.settings, embedder_for(deployment.settings, "bulk"))
    assert report.counts == {**dict.fromkeys(CLASSES, 0), "only_in_app": 10}
    assert report.classes["stale_reasons"] == {"never_in_ledger": 10}


def test_an_empty_app_collection_is_reported_as_empty_and_not_imported(tmp_path, pg_dsn):
    from candlefire_pipeline.operations.adoption.importer import run_import
    from candlefire_pipeline_tests.adoption.app_indexer import index_papers

    folder = tmp_path / "empty-app"
    index_papers(folder, [], scenario.app_embed)
    deployment = scenario.deployment(tmp_path, pg_dsn=pg_dsn)
    settings = replace(deployment.settings, app_collection=replace(
        deployment.settings.app_collection, path=folder))  # fmt: skip
    scenario.write_drops(settings)
    embedder = embedder_for(settings, "bulk")
    report, _ = build_report(settings, embedder)
    assert report.rows == 0 and report.counts["only_in_ledger"] == 10
    assert report.model["verdict"] == "no_rows"
    with pytest.raises(ValueError, match="holds no rows: nothing to import"):
        run_import(settings, embedder)
    assert not list(settings.batches_dir.glob("+app-*"))
