"""papers -> chunks -> embeddings: one parquet set per ingest batch (drop file)."""

import dagster as dg

from candlefire_pipeline.corpus.drops import DropFileError, write_chunks, write_papers
from candlefire_pipeline.defs.batch_metadata import combined
from candlefire_pipeline.defs.partitions import batch_keys, ingest_backfill_policy, ingest_batches
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.embedding import write_embeddings
from candlefire_pipeline.embedding.executor import stage_read_batch
from candlefire_pipeline.embedding.ray_executor import RayEmbeddingError, RayUnavailableError

_INGEST = {
    "partitions_def": ingest_batches,
    "backfill_policy": ingest_backfill_policy,
    "group_name": "ingest",
    "kinds": {"parquet"},
}


def _papers_of(context: dg.AssetExecutionContext, settings, key: str) -> dict:
    drop = settings.drops_dir / key
    if not drop.is_file():
        raise dg.Failure(f"drop file {key!r} is not in the drops folder {settings.drops_dir}")
    try:
        summary = write_papers(drop, settings.batch_dir(key))
    except DropFileError as exc:
        raise dg.Failure(str(exc)) from exc
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
        "path": dg.MetadataValue.path(str(settings.batch_dir(key) / "papers.parquet")),
    }


@dg.asset(**_INGEST)
def papers(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    """Accepted papers of one drop file, plus a reject (with a reason) for every other record."""
    settings = pipeline.settings()
    per_batch = {key: _papers_of(context, settings, key) for key in batch_keys(context)}
    summed = ("records_in", "accepted", "rejected", "deleted_pmids")
    return dg.MaterializeResult(metadata=combined(per_batch, summed))


def _chunks_of(context: dg.AssetExecutionContext, settings, key: str) -> dict:
    batch_dir = settings.batch_dir(key)
    summary = write_chunks(batch_dir)
    context.log.info(f"{key}: {summary.papers} papers -> {summary.chunks} chunks")
    sections = "\n".join(f"| {k} | {v} |" for k, v in sorted(summary.sections.items()))
    return {
        "papers": summary.papers,
        "chunks": summary.chunks,
        "full_text_papers": summary.full_text_papers,
        "sections": dg.MetadataValue.md(f"| section | chunks |\n|---|---|\n{sections}"),
        "path": dg.MetadataValue.path(str(batch_dir / "chunks.parquet")),
    }


@dg.asset(**_INGEST, deps=[papers])
def chunks(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    """Section-aware chunks with candle-fire ids (`{pmid}_s{i}`, bare pmid when abstract-only)."""
    settings = pipeline.settings()
    per_batch = {key: _chunks_of(context, settings, key) for key in batch_keys(context)}
    return dg.MaterializeResult(
        metadata=combined(per_batch, ("papers", "chunks", "full_text_papers"))
    )


def _embeddings_of(
    context: dg.AssetExecutionContext, batch_dir, embedder, cache, read_batch: int
) -> dict:
    summary = write_embeddings(
        batch_dir / "chunks.parquet",
        batch_dir / "embeddings.parquet",
        embedder,
        cache,
        read_batch=read_batch,
        progress=context.log.info,
    )
    return {
        "chunks": summary.chunks,
        "embedded": summary.embedded,
        "cached": summary.cached,
        "seconds": round(summary.seconds, 3),
        "chunks_per_second": round(summary.chunks_per_second, 1),
        "model_id": summary.model_id,
        "dim": summary.dim,
    }


@dg.asset(**_INGEST, deps=[chunks])
def embeddings(
    context: dg.AssetExecutionContext, pipeline: PipelineResource
) -> dg.MaterializeResult:
    """One L2-normalized float32 vector per chunk; unchanged chunks come from the cache.

    The model runs in this process or on Ray actors (CANDLEFIRE_EMBED_EXECUTOR); only cache
    misses leave the process, and rows are written in chunk order either way.
    """
    settings = pipeline.settings()
    cache = pipeline.embedding_cache()
    per_batch = {}
    try:
        with pipeline.stage_embedder() as embedder:
            for key in batch_keys(context):
                per_batch[key] = _embeddings_of(
                    context, settings.batch_dir(key), embedder, cache, stage_read_batch(settings)
                )
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
