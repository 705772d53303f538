"""Every live generation's definitions (besides the default's), read from the registry when
the code location loads: assets, checks and build jobs. Reload the location after
`candlefire generation create` or `gc --apply`."""

import dagster as dg

from candlefire_pipeline.defs.generations.assets import generation_assets
from candlefire_pipeline.defs.generations.checks import generation_checks
from candlefire_pipeline.defs.generations.parity import (
    generation_gate_checks,
    generation_parity_report,
)
from candlefire_pipeline.defs.jobs import generation_build_job
from candlefire_pipeline.generations.batches import drop_chunker
from candlefire_pipeline.generations.registry import extra_generations
from candlefire_pipeline.settings import Settings


def all_generation_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    chunker, stores = drop_chunker(settings), settings.stores
    return [
        asset
        for generation in extra_generations(settings)
        for asset in [
            *generation_assets(generation, stores, chunker),
            generation_parity_report(generation, stores),
        ]
    ]


def all_generation_checks(settings: Settings) -> list[dg.AssetChecksDefinition]:
    return [
        check
        for generation in extra_generations(settings)
        for check in [
            *generation_checks(generation, settings.stores),
            *generation_gate_checks(generation),
        ]
    ]


def all_generation_jobs(settings: Settings) -> list:
    """One build job per live generation besides the default (`candlefire generation build`)."""
    return [generation_build_job(g.name) for g in extra_generations(settings)]
