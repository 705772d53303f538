"""papers -> chunks -> embeddings: one parquet set per ingest batch (one drop file).

A step holds one drop file, or a backfill range of them (BackfillPolicy.multi_run) that it
handles in file-name order; its metadata is the drop's own, or totals and a row per drop.
"""

import dagster as dg

from candlefire_pipeline.corpus.drop_record import drop_file, record_drops
from candlefire_pipeline.corpus.drops import DropFileError, write_chunks, write_papers
from candlefire_pipeline.defs.batch_metadata import combined
from candlefire_pipeline.defs.partitions import batch_keys, ingest_backfill_policy, ingest_batches
from candlefire_pipeline.defs.progress import progress_logger
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.defs.versions import embedding_code_version
from candlefire_pipeline.embedding import write_embeddings
from candlefire_pipeline.embedding.executor import stage_read_batch
from candlefire_pipeline.embedding.ray_executor import RayEmbeddingError, RayUnavailableError
from candlefire_pipeline.generations.batches import drop_chunker
from candlefire_pipeline.settings import Settings, code_location_settings

_INGEST = {
    "partitions_def": ingest_batches,
    "backfill_policy": ingest_backfill_policy,
    "group_name": "ingest",
    "kinds": {"parquet"},
}


def _per_drop(context, pipeline: PipelineResource, of, summed, listed=()) -> dg.MaterializeResult:
    """`of(context, settings, key)` for each drop of the step, in file-name order; the drop's
    metadata, or the `summed` totals and a row per drop."""
    settings = pipeline.settings()
    per_batch = {key: of(context, settings, key) for key in batch_keys(context)}
    return dg.MaterializeResult(metadata=combined(per_batch, summed, listed))


def _papers_of(context: dg.AssetExecutionContext, settings: Settings, key: str) -> dict:
    drop = settings.drops_dir / key
    if not drop.is_file():
        raise dg.Failure(f"drop file {key!r} is not in the drops folder {settings.drops_dir}")
    version = drop_file(drop)  # before reading: a file changed meanwhile stays new
    try:
        summary = write_papers(drop, settings.batch_dir(key), settings.ingest)
    except DropFileError as exc:
        raise dg.Failure(str(exc)) from exc
    record_drops(settings.drop_record_file, [version], source=f"run {context.run.run_id}")
    context.log.info(
        f"{key}: {summary.records_in} records -> {summary.accepted} accepted, "
        f"{summary.rejected} rejected, {summary.deleted} deletions"
    )
    return {
        "records_in": summary.records_in,
        "accepted": summary.accepted,
        "rejected": summary.rejected,
        "deleted_pmids": summary.deleted,
        "reject_reasons": dg.MetadataValue.md(summary.reasons_markdown()),
        "drop_fingerprint": version.run_key,
        "path": dg.MetadataValue.path(str(settings.batch_dir(key) / "papers.parquet")),
    }


@dg.asset(
    **_INGEST,
    description=(
        "Accepted papers of one drop file (JSON lines or MEDLINE XML, possibly gzipped), plus "
        "a reject with a reason for every other record and the PMIDs the drop deletes. "
        "accepted + rejected always equals records in."
    ),
    metadata={"written_to": "data/batches/<drop>/{papers,rejects,deleted}.parquet"},
)
def papers(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    summed = ("records_in", "accepted", "rejected", "deleted_pmids")
    return _per_drop(context, pipeline, _papers_of, summed, ("drop_fingerprint",))


def _chunks_of(context: dg.AssetExecutionContext, settings: Settings, key: str) -> dict:
    batch_dir = settings.batch_dir(key)
    summary = write_chunks(batch_dir, drop_chunker(settings))
    context.log.info(f"{key}: {summary.papers} papers -> {summary.chunks} chunks")
    return chunks_metadata(summary, batch_dir)


def chunks_metadata(summary, batch_dir) -> dict:
    """One drop's chunking figures (the drops' chunker, or a generation's own)."""
    sections = "\n".join(f"| {k} | {v} |" for k, v in sorted(summary.sections.items()))
    return {
        "papers": summary.papers,
        "chunks": summary.chunks,
        "full_text_papers": summary.full_text_papers,
        "sections": dg.MetadataValue.md(f"| section | chunks |\n|---|---|\n{sections}"),
        "path": dg.MetadataValue.path(str(batch_dir / "chunks.parquet")),
    }


@dg.asset(
    **_INGEST,
    deps=[papers],
    description=(
        "candle-fire's section-aware chunks: up to 6 sections per full-text paper (ids "
        "`{pmid}_s{i}`), one chunk with the bare pmid as id for an abstract-only paper."
    ),
    metadata={"written_to": "data/batches/<drop>/chunks.parquet"},
)
def chunks(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    return _per_drop(context, pipeline, _chunks_of, ("papers", "chunks", "full_text_papers"))


def stage_options(context: dg.AssetExecutionContext, settings: Settings) -> dict:
    """How write_embeddings runs in a step: read batch, progress lines and their interval."""
    return {
        "read_batch": stage_read_batch(settings),
        "progress": progress_logger(context),
        "progress_interval": settings.embed_progress_seconds,
    }


def _embeddings_of(context: dg.AssetExecutionContext, settings: Settings, key, embedder, cache):
    batch_dir = settings.batch_dir(key)
    summary = write_embeddings(
        batch_dir / "chunks.parquet",
        batch_dir / "embeddings.parquet",
        embedder,
        cache,
        **stage_options(context, settings),
    )
    return embedding_metadata(summary)


def embedding_metadata(summary) -> dict:
    """One drop's embedding figures (the default generation's asset and every other one's)."""
    return {
        "chunks": summary.chunks,
        "embedded": summary.embedded,
        "cached": summary.cached,
        "seconds": round(summary.seconds, 3),
        "chunks_per_second": round(summary.chunks_per_second, 1),
        "model_id": summary.model_id,
        "dim": summary.dim,
    }


def build_embeddings(code_version: str) -> dg.AssetsDefinition:
    """The embeddings asset at a code version (embedding_code_version of the settings)."""

    @dg.asset(
        **_INGEST,
        name="embeddings",
        deps=[chunks],
        code_version=code_version,
        description=(
            "One L2-normalized float32 vector per chunk from the configured model; a text this "
            "model already embedded (cache keyed by model identity and text hash) is not "
            "embedded again. The "
            "model runs in this process or on Ray actors (CANDLEFIRE_EMBED_EXECUTOR); only "
            "cache misses leave the process, and rows are written in chunk order either way. "
            "The code version names the model: changing it marks this asset stale, and both "
            "stores once it is re-embedded (a new data version)."
        ),
        metadata={"written_to": "data/batches/<drop>/embeddings.parquet"},
    )
    def embeddings(
        context: dg.AssetExecutionContext, pipeline: PipelineResource
    ) -> dg.MaterializeResult:
        settings = pipeline.settings()
        cache = pipeline.embedding_cache()
        per_batch = {}
        try:
            with pipeline.stage_embedder() as embedder:
                for key in batch_keys(context):
                    per_batch[key] = _embeddings_of(context, settings, key, embedder, cache)
        except (RayUnavailableError, RayEmbeddingError) as exc:
            raise dg.Failure(str(exc)) from exc
        metadata = combined(per_batch, ("chunks", "embedded", "cached"))
        return dg.MaterializeResult(
            metadata={
                **metadata,
                "executor": settings.embed_executor,
                "model_id": embedder.model_id,
                "dim": embedder.dim,
            }
        )

    return embeddings


embeddings = build_embeddings(embedding_code_version(code_location_settings()))
