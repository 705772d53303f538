"""Opening the read side of the store a serving target names (pgvector or Chroma)."""

from __future__ import annotations

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import pg_ann_params, pg_cache_params, resolve_dsn
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CHROMA, PGVECTOR


def open_store(target: Target, settings: Settings, embedder):
    """The target's store, read only, from the generation's settings (Chroma is imported only
    when it serves)."""
    if target.backend == PGVECTOR:
        from candlefire_pipeline.app.pg_store import PgCollectionStore

        return PgCollectionStore(resolve_dsn(settings), settings.pg_table,
                                 pg_ann_params(settings), embedder, pg_cache_params(settings),
                                 settings.app_client)  # fmt: skip
    if target.backend == CHROMA:
        try:
            from candlefire_pipeline.app.chroma_store import ChromaCollectionStore
        except ModuleNotFoundError as exc:
            if exc.name != "chromadb":
                raise
            raise BackendUnavailableError(  # an app installed without the rollback path
                "the serving switch names Chroma, and chromadb is not installed here: "
                "pip install 'candlefire_pipeline[chroma]' (docs/APP.md)"
            ) from exc
        return ChromaCollectionStore(settings, embedder)
    raise ValueError(f"the serving switch names {target.backend!r}; the collection reads "
                     f"{PGVECTOR} or {CHROMA}")  # fmt: skip
