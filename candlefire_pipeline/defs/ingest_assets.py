"""papers -> chunks -> embeddings: one parquet set per ingest batch."""

import dagster as dg

from candlefire_pipeline.corpus.drops import (
    DropFileError,
    validate_batch_key,
    write_chunks,
    write_papers,
)
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.embedding import write_embeddings


@dg.asset(partitions_def=ingest_batches, group_name="ingest", kinds={"parquet"})
def papers(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    """Accepted papers of one drop file, plus a reject (with a reason) for every other record."""
    settings = pipeline.settings()
    key = validate_batch_key(context.partition_key)
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
    return dg.MaterializeResult(
        metadata={
            "records_in": summary.records_in,
            "accepted": summary.accepted,
            "rejected": summary.rejected,
            "deleted_pmids": summary.deleted,
            "reject_reasons": dg.MetadataValue.md(summary.reasons_markdown()),
            "path": dg.MetadataValue.path(str(settings.batch_dir(key) / "papers.parquet")),
        }
    )


@dg.asset(partitions_def=ingest_batches, group_name="ingest", kinds={"parquet"}, deps=[papers])
def chunks(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> dg.MaterializeResult:
    """Section-aware chunks with candle-fire ids (`{pmid}_s{i}`, bare pmid when abstract-only)."""
    settings = pipeline.settings()
    batch_dir = settings.batch_dir(validate_batch_key(context.partition_key))
    summary = write_chunks(batch_dir)
    context.log.info(f"{summary.papers} papers -> {summary.chunks} chunks")
    sections = "\n".join(f"| {k} | {v} |" for k, v in sorted(summary.sections.items()))
    return dg.MaterializeResult(
        metadata={
            "papers": summary.papers,
            "chunks": summary.chunks,
            "full_text_papers": summary.full_text_papers,
            "sections": dg.MetadataValue.md(f"| section | chunks |\n|---|---|\n{sections}"),
            "path": dg.MetadataValue.path(str(batch_dir / "chunks.parquet")),
        }
    )


@dg.asset(partitions_def=ingest_batches, group_name="ingest", kinds={"parquet"}, deps=[chunks])
def embeddings(
    context: dg.AssetExecutionContext, pipeline: PipelineResource
) -> dg.MaterializeResult:
    """One L2-normalized float32 vector per chunk; unchanged chunks come from the cache."""
    settings = pipeline.settings()
    batch_dir = settings.batch_dir(validate_batch_key(context.partition_key))
    summary = write_embeddings(
        batch_dir / "chunks.parquet",
        batch_dir / "embeddings.parquet",
        pipeline.embedder(),
        pipeline.embedding_cache(),
        progress=context.log.info,
        progress_interval=settings.embed_progress_seconds,
    )
    return dg.MaterializeResult(
        metadata={
            "chunks": summary.chunks,
            "embedded": summary.embedded,
            "cached": summary.cached,
            "seconds": round(summary.seconds, 3),
            "chunks_per_second": round(summary.chunks_per_second, 1),
            "model_id": summary.model_id,
            "dim": summary.dim,
        }
    )
