"""pgvector_chunks and chroma_chunks: each applies the step's batches to its store, in order."""

import dagster as dg

from candlefire_pipeline.defs.batch_metadata import combined
from candlefire_pipeline.defs.ingest_assets import embeddings
from candlefire_pipeline.defs.partitions import batch_keys, ingest_backfill_policy, ingest_batches
from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.operations.indexing import ApplySummary, apply_batch

#: One writer per store at a time (limits in dagster.yaml `concurrency.pools`): the ledger
#: decides what a batch may overwrite from what the store has applied, which needs that order.
POSTGRES_POOL = "postgres_writes"
CHROMA_POOL = "chroma_writes"

_SUMMED = (
    "rows_written", "papers_replaced", "papers_unchanged", "papers_superseded",
    "papers_deleted", "chunks_deleted",
)  # fmt: skip


def _apply(context: dg.AssetExecutionContext, pipeline: PipelineResource, store) -> dict:
    """Apply the step's batches to one store in file-name order; the materialization metadata."""
    settings = pipeline.settings()
    embedder = pipeline.embedder()
    per_batch = {}
    with store.open() as backend:
        for key in batch_keys(context):
            summary = apply_batch(
                backend, settings.batches_dir, key, embedder.model_id, embedder.dim
            )
            context.log.info(
                f"{summary.store} <- {key}: {summary.rows_written} rows written, "
                f"{summary.papers_replaced} papers replaced, {summary.papers_deleted} deleted"
            )
            per_batch[key] = _metadata(summary)
        total = backend.count()
    context.log.info(f"{backend.name} holds {total} chunks")
    return {**combined(per_batch, _SUMMED), "store_chunks": total}


def _metadata(summary: ApplySummary) -> dict:
    return {
        "rows_written": summary.rows_written,
        "papers_replaced": summary.papers_replaced,
        "papers_unchanged": summary.papers_unchanged,
        "papers_superseded": summary.papers_superseded,
        "papers_deleted": summary.papers_deleted,
        "chunks_deleted": summary.chunks_deleted,
        "seconds": round(summary.seconds, 3),
        "rows_per_second": round(summary.rows_per_second, 1),
    }


_STORE = {
    "partitions_def": ingest_batches,
    "backfill_policy": ingest_backfill_policy,
    "group_name": "stores",
    "deps": [embeddings],
}


@dg.asset(**_STORE, kinds={"postgres"}, pool=POSTGRES_POOL)
def pgvector_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    """The batch applied to the Postgres `chunks` table (one transaction, replace by paper)."""
    return dg.MaterializeResult(metadata=_apply(context, pipeline, pgvector))


@dg.asset(**_STORE, kinds={"chromadb"}, pool=CHROMA_POOL)
def chroma_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, chroma: ChromaResource
) -> dg.MaterializeResult:
    """The batch applied to the Chroma collection (same ids and vectors, cosine space)."""
    return dg.MaterializeResult(metadata=_apply(context, pipeline, chroma))
