"""What the candle-fire app imports to flip: a chromadb-compatible collection on the serving store.

`open_collection()` replaces the line that opens the app's Chroma collection; the object answers
the read calls the app makes (count, get, query) as the project's Chroma collection does, from
whatever the serving switch names (docs/APP.md). Entry: `collection`. `calls` and `filters`
check the arguments, `pg_store` / `pg_sql` and `chroma_store` answer them, `results` shapes the
answers, `shadow` replays sampled calls on the other store, `model` and `model_check` take the
app's own embedding function and check it against each store's vectors. Never imports Dagster,
nor Chroma unless Chroma serves.

Importing this module loads nothing heavy (the app's cold start): the collection, numpy and the
store's driver load when a collection is opened, and `ServingCollection`,
`ReadOnlyCollectionError` and `QueryModelMismatchError` on first use (module `__getattr__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from candlefire_pipeline.app.filters import UnsupportedCallError

if TYPE_CHECKING:
    from candlefire_pipeline.app.collection import ReadOnlyCollectionError, ServingCollection
    from candlefire_pipeline.app.model_check import QueryModelMismatchError
    from candlefire_pipeline.settings import Settings

__all__ = [
    "QueryModelMismatchError",
    "ReadOnlyCollectionError",
    "ServingCollection",
    "UnsupportedCallError",
    "open_collection",
]


def open_collection(settings: Settings | None = None, embedder=None, *,
                    embedding_function=None) -> ServingCollection:  # fmt: skip
    """The serving collection, with settings from the environment (as the reader reads them)
    unless given; the query model is loaded on the first query that needs it.

    `embedding_function`: the app's own chromadb-style function (`ef(input) -> vectors`, the one
    it hands Chroma) as the query model instead of the project's ONNX export; each store checks
    it against its own stored vectors before its first query (app/model_check.py)."""
    from candlefire_pipeline.app.collection import ServingCollection
    from candlefire_pipeline.settings import Settings

    return ServingCollection(settings or Settings.from_env(), embedder,
                             embedding_function=embedding_function)  # fmt: skip


def __getattr__(name: str):
    if name in ("ReadOnlyCollectionError", "ServingCollection"):
        from candlefire_pipeline.app import collection

        return getattr(collection, name)
    if name == "QueryModelMismatchError":
        from candlefire_pipeline.app import model_check

        return model_check.QueryModelMismatchError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
