"""Which stores are fed (CANDLEFIRE_STORES) and which one the reader may be forced to serve."""

from __future__ import annotations

from candlefire_pipeline.settings.env import check_choice, env_str
from candlefire_pipeline.stores import (
    DEFAULT_STORES,
    REQUIRED_STORES,
    SERVABLE_STORES,
    STORE_NAMES,
)


def parse_stores(raw: str | None) -> tuple[str, ...]:
    """CANDLEFIRE_STORES ("pgvector,chroma,qdrant") as known store names in canonical order."""
    if raw is None:
        return DEFAULT_STORES
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(STORE_NAMES))
    if unknown:
        raise ValueError(
            f"CANDLEFIRE_STORES: unknown store(s) {', '.join(unknown)}; "
            f"known: {', '.join(STORE_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"CANDLEFIRE_STORES names a store twice: {raw!r}")
    missing = [name for name in REQUIRED_STORES if name not in names]
    if missing:
        raise ValueError(
            f"CANDLEFIRE_STORES must include {', '.join(REQUIRED_STORES)} (the flip compares "
            f"them); missing: {', '.join(missing)}"
        )
    return tuple(name for name in STORE_NAMES if name in names)


def serving_override() -> str | None:
    """CANDLEFIRE_SERVING_BACKEND: the reader's emergency lever, or None."""
    value = env_str("CANDLEFIRE_SERVING_BACKEND")
    if value is None:
        return None
    return check_choice("CANDLEFIRE_SERVING_BACKEND", value.lower(), SERVABLE_STORES)
