"""Resources: thin wrappers that turn settings into core objects."""

from dataclasses import fields, replace
from pathlib import Path
from typing import ClassVar

import dagster as dg
from pydantic import PrivateAttr

from candlefire_pipeline.backends.factory import opened_backend, resolve_dsn
from candlefire_pipeline.embedding import EmbeddingCache, embedder_for, stage_embedder
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CHROMA, PGVECTOR, QDRANT, STORE_NAMES


class SettingsResource(dg.ConfigurableResource):
    """A resource whose settings are read from the environment once per run, on first use."""

    _settings: Settings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._settings = None  # a new run sees the environment as it is now

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = self.configured(Settings.from_env())
        return self._settings

    def configured(self, settings: Settings) -> Settings:
        """The environment's settings with this resource's fields applied."""
        return settings


class PipelineResource(SettingsResource):
    """Paths, model and retrieval settings; fields left unset fall back to the environment."""

    data_dir: str | None = None
    model_id: str | None = None

    def configured(self, settings: Settings) -> Settings:
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

    def stage_embedder(self):
        """The embedding stage's embedder (in-process or Ray actors), as a context manager."""
        return stage_embedder(self.settings())

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.settings().cache_dir / "embeddings.sqlite")


def for_generation(settings: Settings, generation=None) -> Settings:
    """The store settings of the default generation (None) or of another one's target."""
    if generation is None:
        return settings
    from candlefire_pipeline.generations.view import generation_settings

    return generation_settings(settings, generation)


class StoreResource(SettingsResource):
    """A store: each field named after a setting (`<prefix><field>`) overrides it when set, so
    the store's parameters live in one place (settings) and a field left unset keeps the
    environment's; a field that names no setting (a subclass's own) is not one."""

    #: the store's name (backends/factory opens it by name)
    store: ClassVar[str]
    #: what its settings' names start with
    prefix: ClassVar[str]

    def configured(self, settings: Settings) -> Settings:
        known = {setting.name for setting in fields(settings)}
        given = {}
        for field in type(self).model_fields:
            name, value = f"{self.prefix}{field}", getattr(self, field)
            if value and name in known:
                given[name] = value
        return replace(settings, **given)

    def open(self, generation=None):
        """The store of a generation's target (None: the default generation's), opened."""
        return opened_backend(self.store, for_generation(self.settings(), generation))


class PgVectorResource(StoreResource):
    """The pgvector store: the server at `dsn`, or the embedded one under the data dir."""

    store, prefix = PGVECTOR, "pg_"
    dsn: str | None = None
    table: str | None = None

    def resolved_dsn(self) -> str:
        return resolve_dsn(self.settings())


class ChromaResource(StoreResource):
    """The Chroma store: an HTTP server when `host` is set, else the folder under the data dir.

    `token` (the proxy's bearer token) is a secret: build_resources passes an EnvVar.
    """

    store, prefix = CHROMA, "chroma_"
    host: str | None = None
    port: int | None = None
    collection: str | None = None
    token: str | None = None


class QdrantResource(StoreResource):
    """The Qdrant store: a server when `url` is set, else local mode in the data dir's folder."""

    store, prefix = QDRANT, "qdrant_"
    url: str | None = None
    api_key: str | None = None
    collection: str | None = None


def store_resources(context) -> dict[str, StoreResource]:
    """Every store's resource by store name, from a step that requires them all."""
    return {name: getattr(context.resources, name) for name in STORE_NAMES}


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resources; the DSN, the Chroma token and the Qdrant key stay EnvVars (never shown)."""
    return {
        "pipeline": PipelineResource(),
        "pgvector": PgVectorResource(
            dsn=dg.EnvVar("CANDLEFIRE_PG_DSN") if settings.pg_dsn else None
        ),
        "chroma": ChromaResource(
            token=dg.EnvVar("CANDLEFIRE_CHROMA_TOKEN") if settings.chroma_token else None
        ),
        "pubmed": PubmedResource(
            api_key=dg.EnvVar("NCBI_API_KEY") if settings.ncbi_api_key else None
        ),
        "qdrant": QdrantResource(
            api_key=dg.EnvVar("CANDLEFIRE_QDRANT_API_KEY") if settings.qdrant_api_key else None
        ),
    }


class PubmedResource(SettingsResource):
    """NCBI E-utilities: where to ask and who asks (the api key stays an EnvVar, never shown)."""

    base_url: str | None = None
    api_key: str | None = None
    email: str | None = None

    def fetch(self, query: str, since, until, drops_dir: Path, batch_size: int | None = None):
        from candlefire_pipeline.corpus.pubmed import EFETCH_BATCH, EUTILS_BASE, fetch_pubmed

        settings = self.settings()
        return fetch_pubmed(
            query, since, drops_dir, until=until, batch_size=batch_size or EFETCH_BATCH,
            base_url=self.base_url or EUTILS_BASE,
            api_key=self.api_key or settings.ncbi_api_key,
            email=self.email or settings.ncbi_email,
        )  # fmt: skip
