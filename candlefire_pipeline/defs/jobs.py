"""Jobs: per-batch ingest into every fed store, and the parity refresh that gates the flip."""

import dagster as dg

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups("ingest", "stores"),
    description="One drop file: papers -> chunks -> embeddings -> each store in CANDLEFIRE_STORES.",
)

parity_job = dg.define_asset_job(
    "parity_job",
    selection=dg.AssetSelection.groups("parity"),
    description="Parity report on both stores, then the gated serving-backend switch.",
)
