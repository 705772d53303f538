import dagster as dg

from candlefire_pipeline.definitions import defs

ASSETS = {
    "papers", "chunks", "embeddings", "pgvector_chunks", "chroma_chunks", "qdrant_chunks",
    "parity_report", "serving_backend",
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
