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


def _store_check(
    generation: Generation, store: str, name: str, judge, resources=(), **options
) -> dg.AssetChecksDefinition:
    """The blocking check `<store>_<name>` of the generation's store asset: passed with a note
    while the store is retired, else `judge(context, settings, current)` decides."""

    @dg.asset_check(
        asset=_key(generation, store),
        name=f"{store}_{name}",
        blocking=True,
        required_resource_keys={"pipeline", store, *resources},
        **options,
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        settings = context.resources.pipeline.settings()
        if (retired := retired_result(settings, store)) is not None:
            return retired
        return judge(context, settings, live_generation(settings, generation.name))

    return _check


def _ledger_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    def judge(context, settings, current) -> dg.AssetCheckResult:
        ledger = StoreLedger(batches_dir(settings, current), store)
        applied = ledger.applied()
        with getattr(context.resources, store).open(current) as backend:
            actual = backend.chunk_hashes()
        diff = diff_inventory(ledger.expected_chunks(), actual)
        return diff_result(diff, batches=len(applied), store_chunks=len(actual))

    return _store_check(
        generation,
        store,
        "holds_current_versions",
        judge,
        pool=STORE_POOLS[store],
        description="Exactly the chunk ids and content hashes of every paper's latest version, "
        f"per generation {generation.name}'s own ledger.",
    )


def _dimension_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    def judge(context, settings, current) -> dg.AssetCheckResult:
        with getattr(context.resources, store).open(current) as backend:
            stored = backend.stored_model()
        expected = (current.identity.embedding_id, current.identity.dim)
        return dg.AssetCheckResult(
            passed=stored is None or tuple(stored) == expected,
            metadata={"stored": str(stored), "generation": str(expected)},
        )

    return _store_check(
        generation,
        store,
        "dimension_matches_model",
        judge,
        description=f"The stored vectors are {generation.identity.embedding_id}'s, "
        f"{generation.identity.dim}-dim.",
    )


def _agreement_check(generation: Generation, store: str) -> dg.AssetChecksDefinition:
    def judge(context, settings, current) -> dg.AssetCheckResult:
        with context.resources.pgvector.open(current) as pg:
            pg_hashes = pg.chunk_hashes()
        with getattr(context.resources, store).open(current) as other:
            other_hashes = other.chunk_hashes()
        return diff_result(
            diff_inventory(pg_hashes, other_hashes),
            pgvector_chunks=len(pg_hashes),
            **{f"{store}_chunks": len(other_hashes)},
        )

    return _store_check(
        generation,
        store,
        "agrees_with_pgvector",
        judge,
        resources=("pgvector",),
        additional_deps=[_key(generation, "pgvector")],
        description=f"{store} holds the chunk ids and hashes of the generation's pgvector.",
    )


def generation_checks(generation: Generation, stores: Sequence[str]) -> list:
    checks = []
    for store in stores:
        checks += [_ledger_check(generation, store), _dimension_check(generation, store)]
        if store != "pgvector":
            checks.append(_agreement_check(generation, store))
    return checks
