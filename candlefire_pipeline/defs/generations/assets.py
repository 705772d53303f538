"""Each generation besides the default gets its own assets under its name as key prefix.

`<name>/embeddings` (after `<name>/chunks` when its chunker differs from the drops'), then one
`<name>/<store>_chunks` per fed store, on the same drop partitions as the default assets. They
carry GENERATION_FEED_TAG, so `ingest_job` (the run per new drop) feeds every live generation;
building one over the drops already ingested is a backfill of its group. Why key prefixes and
not a partition dimension: docs/GENERATIONS.md, section 6.
"""

from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.defs.batch_metadata import combined
from candlefire_pipeline.defs.ingest_assets import (
    chunks,
    chunks_metadata,
    embedding_metadata,
    papers,
    stage_options,
)
from candlefire_pipeline.defs.jobs import GENERATION_FEED_TAG, GENERATION_TAG
from candlefire_pipeline.defs.partitions import batch_keys, ingest_backfill_policy, ingest_batches
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.defs.stores.assets import apply_metadata
from candlefire_pipeline.defs.stores.policies import STORE_KINDS, STORE_POOLS, STORE_WRITE_RETRY
from candlefire_pipeline.defs.versions import EMBEDDING_STAGE_VERSION
from candlefire_pipeline.embedding import stage_embedder
from candlefire_pipeline.embedding.ray_executor import RayEmbeddingError, RayUnavailableError
from candlefire_pipeline.generations.batches import embed_batch, prepare_chunks
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.settings import Settings


def group_name(generation: Generation) -> str:
    return f"generation_{generation.name}"


def live_generation(settings: Settings, name: str) -> Generation:
    """The generation as the registry says now; a run never writes a dropped one's targets."""
    stored = stored_registry(settings)
    generation = next((g for g in stored.generations if g.name == name), None) if stored else None
    if generation is None or not generation.live:
        state = generation.state if generation else "unknown"
        raise dg.Failure(
            description=f"generation {name!r} is {state}, not live: nothing written; reload the "
            "code location so its assets go",
            allow_retries=False,
        )
    return generation


def _common(generation: Generation) -> dict:
    return {
        "key_prefix": [generation.name],
        "partitions_def": ingest_batches,
        "backfill_policy": ingest_backfill_policy,
        "group_name": group_name(generation),
        "tags": {GENERATION_FEED_TAG: "true", GENERATION_TAG: generation.name},
    }


def _chunks_asset(generation: Generation) -> dg.AssetsDefinition:
    """The generation's own chunks (its chunker differs from the drops')."""

    @dg.asset(
        **_common(generation),
        name="chunks",
        deps=[papers],
        kinds={"parquet"},
        description=f"Chunks of every drop by chunker {generation.identity.chunker}.",
    )
    def _chunks(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        settings = pipeline.settings()
        current = live_generation(settings, generation.name)
        per_batch = {}
        for key in batch_keys(context):
            out, summary = prepare_chunks(settings, current, key)
            per_batch[key] = chunks_metadata(summary, out)
        return dg.MaterializeResult(
            metadata=combined(per_batch, ("papers", "chunks", "full_text_papers"))
        )

    return _chunks


def _embeddings_asset(generation: Generation, upstream) -> dg.AssetsDefinition:
    identity = generation.identity

    @dg.asset(
        **_common(generation),
        name="embeddings",
        deps=[upstream],
        kinds={"parquet"},
        code_version=f"stage={EMBEDDING_STAGE_VERSION};generation={generation.gid}",
        description=(
            f"Vectors of generation {generation.name} ({identity.describe()}): only texts "
            "this model never embedded reach it (cache keyed by model identity and text hash)."
        ),
    )
    def _embeddings(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        settings = pipeline.settings()
        current = live_generation(settings, generation.name)
        view = generation_settings(settings, current)
        cache, per_batch = pipeline.embedding_cache(), {}
        try:
            with stage_embedder(view) as embedder:
                for key in batch_keys(context):
                    summary = embed_batch(settings, current, key, embedder, cache,
                                          **stage_options(context, view))  # fmt: skip
                    per_batch[key] = embedding_metadata(summary)
        except (RayUnavailableError, RayEmbeddingError) as exc:
            raise dg.Failure(str(exc)) from exc
        metadata = combined(per_batch, ("chunks", "embedded", "cached"))
        return dg.MaterializeResult(metadata={**metadata, "generation": generation.gid})

    return _embeddings


def _store_asset(generation: Generation, store: str, upstream) -> dg.AssetsDefinition:
    @dg.asset(
        **_common(generation),
        name=f"{store}_chunks",
        deps=[upstream],
        kinds={STORE_KINDS[store]},
        pool=STORE_POOLS[store],
        retry_policy=STORE_WRITE_RETRY,
        required_resource_keys={"pipeline", store},
        description=f"Generation {generation.name} applied to its own {store} target.",
        metadata={"store": store, "pool": STORE_POOLS[store], "generation": generation.gid},
    )
    def _store(context: dg.AssetExecutionContext):
        pipeline = context.resources.pipeline
        current = live_generation(pipeline.settings(), generation.name)
        resource = getattr(context.resources, store)
        metadata = apply_metadata(context, pipeline, store, resource, current)
        return dg.MaterializeResult(metadata=metadata)

    return _store


def generation_assets(generation: Generation, stores: Sequence[str], drops_chunker: str):
    """The assets of one generation: (chunks,) embeddings and one asset per fed store."""
    assets = []
    upstream = chunks
    if generation.identity.chunker != drops_chunker:
        upstream = _chunks_asset(generation)
        assets.append(upstream)
    embeddings = _embeddings_asset(generation, upstream)
    assets.append(embeddings)
    return assets + [_store_asset(generation, store, embeddings) for store in stores]
