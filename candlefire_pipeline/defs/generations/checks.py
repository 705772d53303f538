"""Blocking checks on each generation's store assets: the same promises as the default's.

Every fed store holds exactly its generation's current versions (against the generation's own
ledger), vectors of the generation's model at its dimension, and the same chunks as the
generation's pgvector.
"""

from collections.abc import Sequence

import dagster as dg

from candlefire_pipeline.corpus.ledger import StoreLedger, diff_inventory
from candlefire_pipeline.defs.generations.assets import live_generation
from candlefire_pipeline.defs.stores.checks import diff_result, retired_result
from candlefire_pipeline.defs.stores.policies import STORE_POOLS
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.view import batches_dir


def _key(generation: Generation, store: str) -> dg.AssetKey:
    return dg.AssetKey([generation.name, f"{store}_chunks"])


def _ledger_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=_key(generation, store),
        name=f"{store}_holds_current_versions",
        blocking=True,
        pool=STORE_POOLS[store],
        required_resource_keys={"pipeline", store},
        description="Exactly the chunk ids and content hashes of every paper's latest version, "
        f"per generation {generation.name}'s own ledger.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        settings = context.resources.pipeline.settings()
        if (retired := retired_result(settings, store)) is not None:
            return retired
        current = live_generation(settings, generation.name)
        ledger = StoreLedger(batches_dir(settings, current), store)
        applied = ledger.applied()
        with getattr(context.resources, store).open(current) as backend:
            actual = backend.chunk_hashes()
        diff = diff_inventory(ledger.expected_chunks(), actual)
        return diff_result(diff, batches=len(applied), store_chunks=len(actual))

    return _check


def _dimension_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=_key(generation, store),
        name=f"{store}_dimension_matches_model",
        blocking=True,
        required_resource_keys={"pipeline", store},
        description=f"The stored vectors are {generation.identity.embedding_id}'s, "
        f"{generation.identity.dim}-dim.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        settings = context.resources.pipeline.settings()
        if (retired := retired_result(settings, store)) is not None:
            return retired
        current = live_generation(settings, generation.name)
        with getattr(context.resources, store).open(current) as backend:
            stored = backend.stored_model()
        expected = (current.identity.embedding_id, current.identity.dim)
        return dg.AssetCheckResult(
            passed=stored is None or tuple(stored) == expected,
            metadata={"stored": str(stored), "generation": str(expected)},
        )

    return _check


def _agreement_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=_key(generation, store),
        name=f"{store}_agrees_with_pgvector",
        additional_deps=[_key(generation, "pgvector")],
        blocking=True,
        required_resource_keys={"pipeline", "pgvector", store},
        description=f"{store} holds the chunk ids and hashes of the generation's pgvector.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        settings = context.resources.pipeline.settings()
        if (retired := retired_result(settings, store)) is not None:
            return retired
        current = live_generation(settings, generation.name)
        with context.resources.pgvector.open(current) as pg:
            pg_hashes = pg.chunk_hashes()
        with getattr(context.resources, store).open(current) as other:
            other_hashes = other.chunk_hashes()
        return diff_result(
            diff_inventory(pg_hashes, other_hashes),
            pgvector_chunks=len(pg_hashes),
            **{f"{store}_chunks": len(other_hashes)},
        )

    return _check


def generation_checks(generation: Generation, stores: Sequence[str]) -> list:
    checks = []
    for store in stores:
        checks += [_ledger_check(generation, store), _dimension_check(generation, store)]
        if store != "pgvector":
            checks.append(_agreement_check(generation, store))
    return checks
