"""Resources: thin wrappers that turn settings into core objects."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg_server import resolve_dsn
from candlefire_pipeline.embedding import EmbeddingCache, embedder_for
from candlefire_pipeline.settings import Settings


class PipelineResource(dg.ConfigurableResource):
    """Paths, model and retrieval settings; fields left unset fall back to the environment."""

    data_dir: str | None = None
    model_id: str | None = None

    def settings(self) -> Settings:
        settings = Settings.from_env()
        if self.data_dir:
            settings = settings.with_data_dir(Path(self.data_dir))
        if self.model_id:
            settings = replace(settings, model_id=self.model_id)
        return settings

    def embedder(self):
        """The bulk-path embedder (the embeddings asset; its identity is the stores' contract)."""
        return embedder_for(self.settings(), "bulk")

    def query_embedder(self):
        """The query-path embedder (retrieval, parity); makes the same vectors as the bulk one."""
        return embedder_for(self.settings(), "query")

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.settings().cache_dir / "embeddings.sqlite")


@contextmanager
def _opened(name: str, settings: Settings) -> Iterator[VectorBackend]:
    backend = open_backend(name, settings)
    try:
        yield backend
    finally:
        backend.close()


class PgVectorResource(dg.ConfigurableResource):
    """The pgvector store: the server at `dsn`, or the embedded one under the data dir.

    Fields left unset come from settings, so the store's parameters live in one place.
    """

    dsn: str | None = None
    table: str | None = None

    def settings(self) -> Settings:
        settings = Settings.from_env()
        return replace(
            settings, pg_dsn=self.dsn or settings.pg_dsn, pg_table=self.table or settings.pg_table
        )

    def resolved_dsn(self) -> str:
        return resolve_dsn(self.settings())

    def open(self):
        return _opened("pgvector", self.settings())


class ChromaResource(dg.ConfigurableResource):
    """The Chroma store: an HTTP server when `host` is set, else the folder under the data dir."""

    host: str | None = None
    port: int | None = None
    collection: str | None = None

    def settings(self) -> Settings:
        settings = Settings.from_env()
        return replace(
            settings,
            chroma_host=self.host or settings.chroma_host,
            chroma_port=self.port or settings.chroma_port,
            chroma_collection=self.collection or settings.chroma_collection,
        )

    def open(self):
        return _opened("chroma", self.settings())


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resources; the DSN stays an EnvVar so Dagster never shows its value."""
    return {
        "pipeline": PipelineResource(),
        "pgvector": PgVectorResource(
            dsn=dg.EnvVar("CANDLEFIRE_PG_DSN") if settings.pg_dsn else None
        ),
        "chroma": ChromaResource(),
    }
