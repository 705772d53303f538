"""The store assets: each applies one batch's embeddings to its store (pgvector, Chroma, Qdrant)."""

from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.defs.ingest_assets import embeddings
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.resources import (
    ChromaResource,
    PgVectorResource,
    PipelineResource,
    QdrantResource,
)
from candlefire_pipeline.operations.indexing import ApplySummary, apply_batch


def _apply(context: dg.AssetExecutionContext, pipeline: PipelineResource, store) -> dict:
    """Apply the partition's batch to one store; the materialization metadata."""
    settings = pipeline.settings()
    key = validate_batch_key(context.partition_key)
    embedder = pipeline.embedder()
    with store.open() as backend:
        summary = apply_batch(backend, settings.batches_dir, key, embedder.model_id, embedder.dim)
        total = backend.count()
    context.log.info(
        f"{summary.store}: {summary.rows_written} rows written, {summary.papers_replaced} "
        f"papers replaced, {summary.papers_deleted} deleted, store holds {total}"
    )
    return _metadata(summary, total)


def _metadata(summary: ApplySummary, total: int) -> dict:
    return {
        "rows_written": summary.rows_written,
        "papers_replaced": summary.papers_replaced,
        "papers_unchanged": summary.papers_unchanged,
        "papers_superseded": summary.papers_superseded,
        "papers_deleted": summary.papers_deleted,
        "chunks_deleted": summary.chunks_deleted,
        "store_chunks": total,
        "seconds": round(summary.seconds, 3),
        "rows_per_second": round(summary.rows_per_second, 1),
        "resumed_batches": ", ".join(summary.resumed) or "none",
    }


@dg.asset(partitions_def=ingest_batches, group_name="stores", kinds={"postgres"}, deps=[embeddings])
def pgvector_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    """The batch applied to the Postgres `chunks` table (one transaction, replace by paper)."""
    return dg.MaterializeResult(metadata=_apply(context, pipeline, pgvector))


@dg.asset(partitions_def=ingest_batches, group_name="stores", kinds={"chromadb"}, deps=[embeddings])
def chroma_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, chroma: ChromaResource
) -> dg.MaterializeResult:
    """The batch applied to the Chroma collection (same ids and vectors, cosine space)."""
    return dg.MaterializeResult(metadata=_apply(context, pipeline, chroma))


@dg.asset(partitions_def=ingest_batches, group_name="stores", kinds={"qdrant"}, deps=[embeddings])
def qdrant_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, qdrant: QdrantResource
) -> dg.MaterializeResult:
    """The batch applied to the Qdrant collection (same chunks and vectors, cosine distance)."""
    return dg.MaterializeResult(metadata=_apply(context, pipeline, qdrant))


STORE_ASSETS = {"pgvector": pgvector_chunks, "chroma": chroma_chunks, "qdrant": qdrant_chunks}


def store_assets(stores: Sequence[str]) -> list[dg.AssetsDefinition]:
    """The store assets of the fed stores (Settings.stores), in that order."""
    return [STORE_ASSETS[name] for name in stores]
