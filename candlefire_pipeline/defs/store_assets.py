"""The store assets: each applies one batch's embeddings to its store (pgvector, Chroma, Qdrant)."""

from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.defs.ingest_assets import embeddings
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.progress import progress_logger
from candlefire_pipeline.defs.resources import (
    ChromaResource,
    PgVectorResource,
    PipelineResource,
    QdrantResource,
)
from candlefire_pipeline.defs.store_policies import (
    CHROMA_POOL,
    POSTGRES_POOL,
    QDRANT_POOL,
    STORE_WRITE_RETRY,
    retried_only_if_transient,
)
from candlefire_pipeline.operations.indexing import ApplySummary, apply_batch


def _apply(context: dg.AssetExecutionContext, pipeline: PipelineResource, store) -> dict:
    """Apply the partition's batch to one store; the materialization metadata."""
    settings = pipeline.settings()
    key = validate_batch_key(context.partition_key)
    embedder = pipeline.embedder()
    with retried_only_if_transient(f"applying {key}"), store.open() as backend:
        summary = apply_batch(
            backend, settings.batches_dir, key, embedder.model_id, embedder.dim,
            progress=progress_logger(context),
        )  # fmt: skip
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


_APPLY_RULES = (
    "Only papers whose content changed are rewritten (replace by paper: a paper's old chunks "
    "go); a MEDLINE DeleteCitation removes the paper; a batch never overwrites a newer version "
    "of a paper from a later drop. Retried with backoff on connection errors only."
)


@dg.asset(
    partitions_def=ingest_batches,
    group_name="stores",
    kinds={"postgres"},
    deps=[embeddings],
    pool=POSTGRES_POOL,
    retry_policy=STORE_WRITE_RETRY,
    description=(
        "The batch applied to the Postgres + pgvector `chunks` table in one transaction "
        f"(HNSW cosine index, trigram index for substring grounding). {_APPLY_RULES}"
    ),
    metadata={"store": "postgres+pgvector", "pool": POSTGRES_POOL},
)
def pgvector_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=_apply(context, pipeline, pgvector))


@dg.asset(
    partitions_def=ingest_batches,
    group_name="stores",
    kinds={"chromadb"},
    deps=[embeddings],
    pool=CHROMA_POOL,
    retry_policy=STORE_WRITE_RETRY,
    description=(
        "The batch applied to the Chroma collection the app serves from today: the same chunk "
        f"ids and precomputed vectors as pgvector, cosine space. {_APPLY_RULES}"
    ),
    metadata={"store": "chroma", "pool": CHROMA_POOL},
)
def chroma_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, chroma: ChromaResource
) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=_apply(context, pipeline, chroma))


@dg.asset(
    partitions_def=ingest_batches,
    group_name="stores",
    kinds={"qdrant"},
    deps=[embeddings],
    pool=QDRANT_POOL,
    retry_policy=STORE_WRITE_RETRY,
    description=(
        "The batch applied to the Qdrant collection, evaluated by the parity report but never "
        f"served: the same chunk ids and vectors, cosine distance. {_APPLY_RULES}"
    ),
    metadata={"store": "qdrant", "pool": QDRANT_POOL},
)
def qdrant_chunks(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, qdrant: QdrantResource
) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=_apply(context, pipeline, qdrant))


STORE_ASSETS = {"pgvector": pgvector_chunks, "chroma": chroma_chunks, "qdrant": qdrant_chunks}


def store_assets(stores: Sequence[str]) -> list[dg.AssetsDefinition]:
    """The store assets of the fed stores (Settings.stores), in that order."""
    return [STORE_ASSETS[name] for name in stores]
