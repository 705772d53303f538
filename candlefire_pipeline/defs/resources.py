"""Resources: thin wrappers that turn settings into core objects."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg

from candlefire_pipeline.backends.chroma import ChromaBackend
from candlefire_pipeline.backends.pg_server import resolve_dsn
from candlefire_pipeline.backends.pgvector import PgVectorBackend
from candlefire_pipeline.embedding import EmbeddingCache, load_embedder
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
        settings = self.settings()
        return load_embedder(settings.model_id, batch_size=settings.embed_batch_size)

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.settings().cache_dir / "embeddings.sqlite")


class PgVectorResource(dg.ConfigurableResource):
    """The pgvector store: the server at `dsn`, or the embedded one under the data dir."""

    dsn: str | None = None
    table: str = "chunks"
    substring_mode: str = "like"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    ef_search: int = 400

    def resolved_dsn(self) -> str:
        return self.dsn or resolve_dsn(Settings.from_env())

    @contextmanager
    def open(self) -> Iterator[PgVectorBackend]:
        backend = PgVectorBackend(
            self.resolved_dsn(),
            table=self.table,
            substring_mode=self.substring_mode,
            hnsw_m=self.hnsw_m,
            hnsw_ef_construction=self.hnsw_ef_construction,
            ef_search=self.ef_search,
        )
        try:
            yield backend
        finally:
            backend.close()


class ChromaResource(dg.ConfigurableResource):
    """The Chroma store: an HTTP server when `host` is set, else a persistent folder."""

    path: str | None = None
    host: str | None = None
    port: int = 8000
    collection: str = "candlefire_chunks"

    @contextmanager
    def open(self) -> Iterator[ChromaBackend]:
        path = None if self.host else Path(self.path or Settings.from_env().chroma_path)
        backend = ChromaBackend(
            path=path, host=self.host, port=self.port, collection=self.collection
        )
        try:
            yield backend
        finally:
            backend.close()


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resources from settings; the DSN stays an EnvVar so Dagster never shows its value."""
    return {
        "pipeline": PipelineResource(),
        "pgvector": PgVectorResource(
            dsn=dg.EnvVar("CANDLEFIRE_PG_DSN") if settings.pg_dsn else None,
            table=settings.pg_table,
            substring_mode=settings.substring_mode,
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            ef_search=settings.hnsw_ef_search,
        ),
        "chroma": ChromaResource(
            host=settings.chroma_host,
            port=settings.chroma_port,
            collection=settings.chroma_collection,
        ),
    }
