"""The pgvector tables a backup records and a restore re-applies: the default generation's and
every live generation's, each with its own Settings (its table, model and ledger)."""

from __future__ import annotations

from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE


def pg_generations(settings: Settings) -> dict[str, Settings]:
    """generation name -> its Settings, for the default and every live generation on pgvector."""
    found = {DEFAULT_NAME: settings}
    registry = stored_registry(settings)
    for generation in registry.generations if registry is not None else ():
        if generation.live and not generation.default:
            found[generation.name] = generation_settings(settings, generation)
    return {name: s for name, s in found.items() if CANDIDATE in s.stores}
