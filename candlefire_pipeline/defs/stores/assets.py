"""The store assets: each applies the step's batches to its store (pgvector, Chroma, Qdrant).

A step holds one drop file, or a backfill range of them (BackfillPolicy.multi_run); the range is
applied in file-name order, the order the ledger assumes. A retired store's step writes nothing:
it records that it passed over each batch (what `candlefire unretire` writes) and says so.
"""

import time
from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.backends.factory import resolve_dsn
from candlefire_pipeline.backends.pg.terms.summary import summarize
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.defs.batch_metadata import batch_span, combined
from candlefire_pipeline.defs.ingest_assets import embeddings
from candlefire_pipeline.defs.partitions import batch_keys, ingest_backfill_policy, ingest_batches
from candlefire_pipeline.defs.progress import progress_logger
from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.defs.stores.policies import (
    STORE_KINDS,
    STORE_POOLS,
    STORE_WRITE_RETRY,
    retried_only_if_transient,
)
from candlefire_pipeline.generations.view import batches_dir as generation_batches_dir
from candlefire_pipeline.operations.indexing import ApplySummary, apply_batch
from candlefire_pipeline.operations.maintenance import gin_upkeep
from candlefire_pipeline.operations.retirement.view import (
    retired_note,
    retired_stores,
    store_writes,
)
from candlefire_pipeline.operations.serving.replication import note_applied_drop
from candlefire_pipeline.stores import CHROMA, PGVECTOR, QDRANT

_SUMMED = (
    "rows_written", "papers_replaced", "papers_unchanged", "papers_superseded",
    "papers_deleted", "chunks_deleted",
)  # fmt: skip


def apply_metadata(
    context: dg.AssetExecutionContext,
    pipeline: PipelineResource,
    name: str,
    store,
    generation=None,
) -> dict:
    """Apply the step's batches to store `name` (its resource `store`) in file-name order, or
    pass over them while it is retired; the materialization metadata.

    `generation` None is the default generation (these assets); another one applies its own
    batch files (its ledger) to its own target, under its own model identity.
    """
    settings = pipeline.settings()
    keys = batch_keys(context)
    if generation is None:
        batches = settings.batches_dir
    else:
        batches = generation_batches_dir(settings, generation)
    with store_writes(settings, name):  # retired or not is decided with no retirement midway
        retirement = retired_stores(settings).get(name)
        if retirement is not None:
            return _passed_over(context, StoreLedger(batches, name), keys, retirement)
        metadata = _applied(context, pipeline, store, keys, batches, generation)
    if name == PGVECTOR:
        # how far a read replica must replay to show this drop (operations/serving/replication)
        metadata["wal_lsn"] = note_applied_drop(settings, resolve_dsn(settings)) or "not recorded"
    return metadata


def _passed_over(context: dg.AssetExecutionContext, ledger: StoreLedger, keys, retirement):
    """A retired store: nothing opened, nothing written; each batch recorded as passed over."""
    note = retired_note(ledger.store, retirement)
    for key in keys:
        ledger.pass_over(key, {"batch_key": key, "retired_since": retirement.since,
                               "passed_over_at": time.time()})  # fmt: skip
    context.log.info(f"{note}: passed over {batch_span(keys)}")
    return {"retired": note, "passed_over_batches": ", ".join(keys),
            "restore": f"candlefire unretire {ledger.store} --reason ..."}  # fmt: skip


def _applied(context, pipeline: PipelineResource, store, keys, batches, generation) -> dict:
    if generation is None:
        embedder = pipeline.embedder()
        model = (embedder.model_id, embedder.dim)
    else:
        model = (generation.identity.embedding_id, generation.identity.dim)
    summaries: dict[str, ApplySummary] = {}
    with (
        retried_only_if_transient(f"applying {batch_span(keys)}"),
        store.open(generation) as backend,
    ):
        for key in keys:
            summary = apply_batch(backend, batches, key, *model, progress=progress_logger(context))
            context.log.info(
                f"{summary.store} <- {key}: {summary.rows_written} rows written, "
                f"{summary.papers_replaced} papers replaced, {summary.papers_deleted} deleted, "
                f"{summary.papers_superseded} held back by a later-named drop"
            )
            if summary.papers_superseded:
                context.log.warning(f"{summary.store} <- {key}: {summary.held_back()}")
            summaries[key] = summary
        total = backend.count()
        context.log.info(f"{backend.name} holds {total} chunks")
        upkeep = _gin_upkeep(context, backend, summaries.values(), total)
        upkeep |= _phrase_index(context, backend)
        upkeep |= _term_cache(context, backend, summaries.values())
    metadata = combined({key: _metadata(s) for key, s in summaries.items()}, _SUMMED,
                        listed=("superseded_by",))  # fmt: skip
    resumed = [batch for s in summaries.values() for batch in s.resumed]
    return {
        **metadata, **upkeep, "store_chunks": total,
        "resumed_batches": ", ".join(resumed) or "none",
    }  # fmt: skip


def _gin_upkeep(context: dg.AssetExecutionContext, backend, summaries, total: int) -> dict:
    """pgvector's trigram GIN checked after a large write, rebuilt concurrently past its bound."""
    if backend.name != PGVECTOR:
        return {}
    changed = sum(s.rows_written + s.chunks_deleted for s in summaries)
    try:
        upkeep = gin_upkeep(backend, changed, total)
    except Exception as exc:  # the batch is committed: a failed check must not fail the write
        context.log.warning(f"trigram index not checked: {type(exc).__name__}: {exc}")
        return {"gin_upkeep": f"not checked: {type(exc).__name__}"}
    if not upkeep.figures:
        return {"gin_upkeep": f"not checked: {upkeep.notes[0]}"}
    out = {
        "gin_bloat": upkeep.figures["gin_bloat"],
        "gin_upkeep": upkeep.notes[0] if upkeep.notes else "within bound",
    }
    for action in upkeep.actions:
        out["gin_upkeep"] = (
            f"reindex FAILED: {action.error}" if action.error
            else f"reindexed in {action.seconds:.1f} s: {action.reason}"
        )  # fmt: skip
        context.log.info(f"{action.target}: {out['gin_upkeep']}")
    return out


def _phrase_index(context: dg.AssetExecutionContext, backend) -> dict:
    """pgvector's phrase index, built after the write where missing (a first build drops it),
    beside reads and writes; until it is valid, cold probes use the trigram index alone."""
    if backend.name != PGVECTOR:
        return {}
    try:
        seconds = backend.build_phrase_index()
    except Exception as exc:  # the batch is committed: a failed build must not fail the write
        context.log.warning(f"phrase index not built: {type(exc).__name__}: {exc}")
        return {"phrase_index": f"not built: {type(exc).__name__}"}
    if seconds is not None:
        context.log.info(f"phrase index built in {seconds:.1f} s (reads and writes went on)")
        return {"phrase_index": "built", "phrase_index_build_seconds": round(seconds, 2)}
    return {"phrase_index": backend.phrase_state()}


def _term_cache(context: dg.AssetExecutionContext, backend, summaries) -> dict:
    """pgvector's term cache: what this step's upkeep cost (its share of the apply) and holds."""
    if backend.name != PGVECTOR:
        return {}
    upkeep = backend.upkeep_total
    applied = sum(s.seconds for s in summaries)
    found = summarize(backend.conn, backend.names)
    out = {
        "term_cache_upkeep_seconds": round(upkeep.seconds, 3),
        "term_cache_upkeep_share": round(upkeep.seconds / applied, 4) if applied else 0.0,
        # the upkeep's part run beside the COPY on a second connection (terms/ahead.py)
        "term_cache_upkeep_beside_copy_seconds": round(upkeep.ahead_seconds, 3),
        "term_cache_entries_changed": upkeep.changed,
        **(found.metadata() if found else {"term_cache_entries": 0}),
    }
    if upkeep.cleared:
        out["term_cache_cleared"] = upkeep.cleared
        context.log.warning(f"term cache cleared: {upkeep.cleared}")
    context.log.info(
        f"term cache upkeep: {upkeep.changed} of {upkeep.entries} entries touched in "
        f"{upkeep.seconds:.3f} s after the COPY ({upkeep.ahead_seconds:.3f} s beside it)"
        + (f"; {found.describe()}" if found else "")
    )
    return out


def _metadata(summary: ApplySummary) -> dict:
    return {
        "rows_written": summary.rows_written,
        "papers_replaced": summary.papers_replaced,
        "papers_unchanged": summary.papers_unchanged,
        "papers_superseded": summary.papers_superseded,
        "superseded_by": ", ".join(f"{k} ({n})" for k, n in sorted(summary.superseded_by.items()))
        or "none",
        "papers_deleted": summary.papers_deleted,
        "chunks_deleted": summary.chunks_deleted,
        "seconds": round(summary.seconds, 3),
        "rows_per_second": round(summary.rows_per_second, 1),
    }


_APPLY_RULES = (
    "Only papers whose content changed are rewritten (replace by paper: a paper's old chunks "
    "go); a MEDLINE DeleteCitation removes the paper; a batch never overwrites a newer version "
    "of a paper that a later drop already applied to this store, so drops may arrive in any "
    "order. A backfill run applies its range of drops in file-name order. Retried with backoff "
    "on connection errors only."
)

_STORE = {
    "partitions_def": ingest_batches,
    "backfill_policy": ingest_backfill_policy,
    "group_name": "stores",
    "deps": [embeddings],
    "retry_policy": STORE_WRITE_RETRY,
}


#: What each store's asset says it is, before the apply rules.
_DESCRIPTIONS = {
    PGVECTOR: "The batch applied to the Postgres + pgvector `chunks` table in one transaction "
    "(HNSW cosine index, trigram index for substring grounding).",
    CHROMA: "The batch applied to the Chroma collection the app serves from today: the same "
    "chunk ids and precomputed vectors as pgvector, cosine space.",
    QDRANT: "The batch applied to the Qdrant collection, evaluated by the parity report but "
    "never served: the same chunk ids and vectors, cosine distance.",
}
#: What a retirable store's asset says after the apply rules.
_RETIREMENT = {
    CHROMA: " Once Chroma is retired (`candlefire retire chroma`), each partition says "
    "`retired since ..., not written` and writes nothing until `candlefire unretire chroma`."
}
_LABELS = {PGVECTOR: "postgres+pgvector", CHROMA: "chroma", QDRANT: "qdrant"}


def _store_asset(store: str) -> dg.AssetsDefinition:
    """`<store>_chunks`: the default generation's batches applied to the store (resource key)."""

    @dg.asset(
        **_STORE,
        name=f"{store}_chunks",
        kinds={STORE_KINDS[store]},
        pool=STORE_POOLS[store],
        required_resource_keys={"pipeline", store},
        description=f"{_DESCRIPTIONS[store]} {_APPLY_RULES}{_RETIREMENT.get(store, '')}",
        metadata={"store": _LABELS[store], "pool": STORE_POOLS[store]},
    )
    def _store(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        resources = context.resources
        metadata = apply_metadata(context, resources.pipeline, store, getattr(resources, store))
        return dg.MaterializeResult(metadata=metadata)

    return _store


pgvector_chunks = _store_asset(PGVECTOR)
chroma_chunks = _store_asset(CHROMA)
qdrant_chunks = _store_asset(QDRANT)

STORE_ASSETS = {PGVECTOR: pgvector_chunks, CHROMA: chroma_chunks, QDRANT: qdrant_chunks}


def store_assets(stores: Sequence[str]) -> list[dg.AssetsDefinition]:
    """The store assets of the fed stores (Settings.stores), in that order."""
    return [STORE_ASSETS[name] for name in stores]
