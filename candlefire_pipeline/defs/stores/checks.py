"""Blocking checks on every fed store: current versions only, the model's dimension, agreement.

A retired store's checks pass and say so: it is not written, and not read (its files may be
gone); `candlefire unretire` checks it against the ledger before it is written again.
"""

from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.corpus.ledger import InventoryDiff, StoreLedger, diff_inventory
from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.defs.stores.assets import STORE_ASSETS, chroma_chunks, pgvector_chunks
from candlefire_pipeline.defs.stores.policies import STORE_POOLS
from candlefire_pipeline.operations.retirement.view import retired_note, retired_stores
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, CHROMA, REFERENCE

MAX_LISTED = 20


def retired_result(settings: Settings, store: str) -> dg.AssetCheckResult | None:
    """The check of a retired store: passed, saying why nothing was checked (None: not retired)."""
    retirement = retired_stores(settings).get(store)
    if retirement is None:
        return None
    return dg.AssetCheckResult(
        passed=True,
        metadata={
            "retired": retired_note(store, retirement),
            "checked": f"nothing: {store} is not written; `candlefire unretire {store}` checks it "
            "against the ledger before it is written again",
        },
    )


def diff_result(diff: InventoryDiff, **metadata) -> dg.AssetCheckResult:
    listed = {
        f"{kind}_ids": ", ".join(ids[:MAX_LISTED]) for kind, ids in diff.as_dict().items() if ids
    }
    return dg.AssetCheckResult(passed=diff.clean, metadata={**diff.counts(), **listed, **metadata})


def _ledger_check(store_asset, resource_key: str, store_name: str, pool: str):
    # In the store's pool: read between two writes, never during another run's write.
    @dg.asset_check(
        asset=store_asset,
        name=f"{store_name}_holds_current_versions",
        blocking=True,
        pool=pool,
        required_resource_keys={"pipeline", resource_key},
        description="Exactly the chunk ids and content hashes of every paper's latest version.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        settings = context.resources.pipeline.settings()
        if (retired := retired_result(settings, store_name)) is not None:
            return retired
        ledger = StoreLedger(settings.batches_dir, store_name)
        applied = ledger.applied()
        expected = ledger.expected_chunks()
        with getattr(context.resources, resource_key).open() as backend:
            actual = backend.chunk_hashes()
        return diff_result(
            diff_inventory(expected, actual), batches=len(applied), store_chunks=len(actual)
        )

    return _check


def _dimension_check(store_asset, resource_key: str, store_name: str):
    @dg.asset_check(
        asset=store_asset,
        name=f"{store_name}_dimension_matches_model",
        blocking=True,
        required_resource_keys={"pipeline", resource_key},
        description="The stored vectors were made by the configured model, at its dimension.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        retired = retired_result(context.resources.pipeline.settings(), store_name)
        if retired is not None:
            return retired
        embedder = context.resources.pipeline.embedder()
        with getattr(context.resources, resource_key).open() as backend:
            stored = backend.stored_model()
        expected = (embedder.model_id, embedder.dim)
        return dg.AssetCheckResult(
            passed=stored is None or tuple(stored) == expected,
            metadata={"stored": str(stored), "configured": str(expected)},
        )

    return _check


@dg.asset_check(
    asset=chroma_chunks,
    additional_deps=[pgvector_chunks],
    blocking=True,
    description="Chroma and pgvector hold the same chunk ids with the same content hashes.",
)
def stores_agree(
    pipeline: PipelineResource, pgvector: PgVectorResource, chroma: ChromaResource
) -> dg.AssetCheckResult:
    if (retired := retired_result(pipeline.settings(), CHROMA)) is not None:
        return retired
    with pgvector.open() as pg, chroma.open() as ch:
        pg_hashes, chroma_hashes = pg.chunk_hashes(), ch.chunk_hashes()
    return diff_result(
        diff_inventory(pg_hashes, chroma_hashes),
        pgvector_chunks=len(pg_hashes),
        chroma_chunks=len(chroma_hashes),
    )


def _agreement_check(store_asset, store_name: str):
    """A store beside pgvector and Chroma holds pgvector's chunk ids and content hashes."""

    @dg.asset_check(
        asset=store_asset,
        name=f"{store_name}_agrees_with_pgvector",
        additional_deps=[pgvector_chunks],
        blocking=True,
        required_resource_keys={"pipeline", "pgvector", store_name},
        description=f"{store_name} and pgvector hold the same chunk ids with the same hashes.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        retired = retired_result(context.resources.pipeline.settings(), store_name)
        if retired is not None:
            return retired
        with context.resources.pgvector.open() as pg:
            pg_hashes = pg.chunk_hashes()
        with getattr(context.resources, store_name).open() as other:
            other_hashes = other.chunk_hashes()
        return diff_result(
            diff_inventory(pg_hashes, other_hashes),
            pgvector_chunks=len(pg_hashes),
            **{f"{store_name}_chunks": len(other_hashes)},
        )

    return _check


def build_store_checks(stores: Sequence[str]) -> list[dg.AssetChecksDefinition]:
    """Ledger and dimension checks per fed store; agreement of each with pgvector."""
    checks = []
    for name in stores:
        asset = STORE_ASSETS[name]
        checks += [
            _ledger_check(asset, name, name, STORE_POOLS[name]),
            _dimension_check(asset, name, name),
        ]
        if name == REFERENCE:
            checks.append(stores_agree)
        elif name != CANDIDATE:
            checks.append(_agreement_check(asset, name))
    return checks
