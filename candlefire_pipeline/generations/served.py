"""When a generation last served: gc counts a generation's age from it (and from its creation).

Called by the serving switch whenever the generation it serves changes. It never fails the
switch: a rollback with the registry unreadable still happens (the generation is then only as
old as its creation says).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from candlefire_pipeline.generations.registry import (
    Registry,
    registry_lock,
    stored_registry,
    write_registry,
)
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


def note_served(settings: Settings, name: str) -> None:
    """Record that generation `name` served until now (nothing without a registry)."""
    try:
        with registry_lock(settings):
            registry = stored_registry(settings)
            if registry is None:
                return
            noted = registry.get(name).with_state(
                registry.get(name).state, last_served_at=datetime.now(UTC).isoformat()
            )
            write_registry(settings, Registry(registry.replaced(noted).generations, stored=True))
    except Exception as exc:
        log.warning("could not record when generation %s last served: %s", name, exc)
