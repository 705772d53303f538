import os
import subprocess
import sys

import dagster as dg

from candlefire_pipeline.definitions import defs

ASSETS = {
    "papers", "chunks", "embeddings", "pgvector_chunks", "chroma_chunks", "qdrant_chunks",
    "parity_report", "serving_backend", "shadow_parity", "store_maintenance", "store_backup",
    "app_collection_adoption",
}  # fmt: skip


def test_definitions_load_with_every_asset_job_sensor_and_schedule():
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert keys == ASSETS
    assert {"ingest_job", "parity_job"} <= {j.name for j in repo.get_all_jobs()}
    assert repo.get_sensor_def("pubmed_drops_sensor")
    assert repo.get_schedule_def("parity_refresh_schedule").cron_schedule


def test_flip_is_gated_by_blocking_checks():
    checks = [c for c in defs.asset_checks or []]
    specs = [spec for c in checks for spec in c.check_specs]
    gated = {
        s.key.name for s in specs if s.blocking and s.asset_key == dg.AssetKey("parity_report")
    }
    assert {"grounding_agreement", "mean_overlap", "report_is_fresh"} <= gated
    live = {s.key.name for s in specs if s.blocking and s.asset_key == dg.AssetKey("shadow_parity")}
    assert live == {"shadow_queries", "shadow_agreement", "shadow_errors"}


def test_every_asset_explains_itself_on_the_lineage_page():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.description and len(node.description) > 60, key
        assert node.kinds, key
    assert graph.get(dg.AssetKey("pgvector_chunks")).metadata["store"] == "postgres+pgvector"


def test_the_fetch_schedule_the_automation_sensor_and_their_targets_are_defined():
    repo = defs.get_repository_def()
    assert repo.get_schedule_def("pubmed_fetch_schedule").job_name == "pubmed_fetch_job"
    automation = repo.get_sensor_def("parity_automation_sensor")
    assert automation.default_status == dg.DefaultSensorStatus.RUNNING
    graph = defs.resolve_asset_graph()
    automated = {
        k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).automation_condition
    }
    assert automated == {"parity_report", "serving_backend", "shadow_parity"}


def test_every_fed_store_has_blocking_ledger_dimension_and_agreement_checks():
    specs = [spec for c in defs.asset_checks or [] for spec in c.check_specs]
    qdrant = {
        s.key.name for s in specs if s.blocking and s.asset_key == dg.AssetKey("qdrant_chunks")
    }
    assert qdrant == {
        "qdrant_holds_current_versions",
        "qdrant_dimension_matches_model",
        "qdrant_agrees_with_pgvector",
    }
    chroma = {s.key.name for s in specs if s.asset_key == dg.AssetKey("chroma_chunks")}
    assert "stores_agree" in chroma


def test_stores_setting_decides_which_store_assets_exist():
    code = (
        "from candlefire_pipeline.definitions import defs\n"
        "repo = defs.get_repository_def()\n"
        "print(sorted(k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()))\n"
        "print(sorted(s.key.name for c in defs.asset_checks for s in c.check_specs))\n"
    )
    env = {**os.environ, "CANDLEFIRE_STORES": "chroma,pgvector"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "qdrant" not in out
    assert "'pgvector_chunks'" in out and "'chroma_chunks'" in out and "stores_agree" in out
