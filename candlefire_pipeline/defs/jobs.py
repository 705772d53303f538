"""Jobs: per-batch ingest into every fed store, and the parity refresh that gates the flip."""

import dagster as dg

#: Tags of the assets of a generation other than the default (defs/generations/assets.py): every
#: feed asset (value "true"; ingest_job selects them), and the generation's name.
GENERATION_FEED_TAG, GENERATION_TAG = "candlefire/generation_feed", "candlefire/generation"

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups("ingest", "stores")
    | dg.AssetSelection.tag(GENERATION_FEED_TAG, "true"),
    description=(
        "One drop file: papers -> chunks -> embeddings -> each store in CANDLEFIRE_STORES, and "
        "the same for every live index generation (its own embeddings and targets)."
    ),
)

parity_job = dg.define_asset_job(
    "parity_job",
    selection=dg.AssetSelection.groups("parity"),
    description="Parity report on both stores, then the gated serving-backend switch.",
)


def generation_build_job(name: str):
    """One generation's feed assets (its embeddings and stores): what `generation build` runs."""
    return dg.define_asset_job(
        f"generation_{name}_build",
        selection=dg.AssetSelection.tag(GENERATION_TAG, name)
        & dg.AssetSelection.tag(GENERATION_FEED_TAG, "true"),
        description=f"Index generation {name}: its chunks/embeddings and stores, per drop.",
    )
