"""What the candle-fire app imports to flip: a chromadb-compatible collection on the serving store.

`open_collection()` replaces the line that opens the app's Chroma collection; the object answers
the read calls the app makes (count, get, query) as the project's Chroma collection does, from
whatever the serving switch names (docs/APP.md). Entry: `collection`. `calls` and `filters`
check the arguments, `pg_store` / `pg_sql` and `chroma_store` answer them, `results` shapes the
answers, `shadow` replays sampled calls on the other store. Never imports Dagster, nor Chroma
unless Chroma serves.

Importing this module loads nothing heavy (the app's cold start): the collection, numpy and the
store's driver load when a collection is opened, and `ServingCollection` /
`ReadOnlyCollectionError` on first use (module `__getattr__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from candlefire_pipeline.app.filters import UnsupportedCallError

if TYPE_CHECKING:
    from candlefire_pipeline.app.collection import ReadOnlyCollectionError, ServingCollection
    from candlefire_pipeline.settings import Settings

__all__ = [
    "ReadOnlyCollectionError",
    "ServingCollection",
    "UnsupportedCallError",
    "open_collection",
]


def open_collection(settings: Settings | None = None, embedder=None) -> ServingCollection:
    """The serving collection, with settings from the environment (as the reader reads them)
    unless given; the query model is loaded on the first query that needs it."""
    from candlefire_pipeline.app.collection import ServingCollection
    from candlefire_pipeline.settings import Settings

    return ServingCollection(settings or Settings.from_env(), embedder)


def __getattr__(name: str):
    if name in ("ReadOnlyCollectionError", "ServingCollection"):
        from candlefire_pipeline.app import collection

        return getattr(collection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
