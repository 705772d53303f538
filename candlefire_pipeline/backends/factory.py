"""Opens a backend by name from Settings; the only place that maps names to classes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import BACKEND_NAMES, CHROMA, MEMORY, PGVECTOR, QDRANT

if TYPE_CHECKING:
    from candlefire_pipeline.backends.pg.layout import AnnParams
    from candlefire_pipeline.backends.pg.terms.cache import CacheParams


def backend_class(name: str) -> type[VectorBackend]:
    """The class behind a backend name (imported on use: Chroma and Qdrant are heavy)."""
    if name == PGVECTOR:
        from candlefire_pipeline.backends.pg.backend import PgVectorBackend

        return PgVectorBackend
    if name == CHROMA:
        from candlefire_pipeline.backends.chroma.backend import ChromaBackend

        return ChromaBackend
    if name == QDRANT:
        from candlefire_pipeline.backends.qdrant.backend import QdrantBackend

        return QdrantBackend
    if name == MEMORY:
        from candlefire_pipeline.backends.memory import MemoryBackend

        return MemoryBackend
    raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}")


def build_backend(name: str, *args, **options) -> VectorBackend:
    """A backend of kind `name` from explicit constructor arguments (tests, benchmarks, tools)."""
    return backend_class(name)(*args, **options)


def resolve_dsn(settings: Settings) -> str:
    """settings.pg_dsn when set, else the embedded server under settings.pg_data_dir."""
    if settings.pg_dsn:
        return settings.pg_dsn
    from candlefire_pipeline.backends.pg.server import EmbeddedPostgres

    return EmbeddedPostgres(settings.pg_data_dir).dsn


def pg_ann_params(settings: Settings) -> AnnParams:
    """The pgvector driver's ANN parameters from the validated CANDLEFIRE_PG_* / HNSW_* settings."""
    from candlefire_pipeline.backends.pg.layout import AnnParams

    return AnnParams(
        **asdict(settings.pg_ann),
        ef_search=settings.hnsw_ef_search,
        ef_search_entities=settings.hnsw_ef_search_entities,
    )


def pg_cache_params(settings: Settings) -> CacheParams:
    """The pgvector term cache's parameters: CANDLEFIRE_TERM_CACHE_*, and the entity stage's
    effort for the walks that make its entries (paid once per kept text, not per request)."""
    from candlefire_pipeline.backends.pg.terms.cache import CacheParams

    cache = settings.term_cache
    return CacheParams(
        enabled=cache.enabled,
        max_entries=cache.max_entries,
        depth=cache.depth,
        fill_ef=settings.hnsw_ef_search_entities,
        keyword_walk=cache.keyword_walk,
        phrase_index=cache.phrase_index,
    )


def open_backend(name: str, settings: Settings) -> VectorBackend:
    """A connected backend (one of BACKEND_NAMES) configured by settings; the caller closes it."""
    if name == PGVECTOR:
        return build_backend(
            PGVECTOR,
            resolve_dsn(settings),
            table=settings.pg_table,
            substring_mode=settings.substring_mode,
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            ann=pg_ann_params(settings),
            cache=pg_cache_params(settings),
        )
    if name == CHROMA:
        local = settings.chroma_host is None
        return build_backend(
            CHROMA,
            path=settings.chroma_path if local else None,
            host=settings.chroma_host,
            port=settings.chroma_port,
            collection=settings.chroma_collection,
            token=settings.chroma_token,
            ssl=settings.chroma_ssl,
            ca_bundle=settings.chroma_ca_bundle,
            ef_search=settings.chroma_ef_search,
            # $contains has one semantics (case-sensitive); the setting chooses pgvector's and the
            # oracle's, and the parity report counts where they differ from Chroma's.
            substring_mode="like",
        )
    if name == QDRANT:
        local = settings.qdrant_url is None
        return build_backend(
            QDRANT,
            path=settings.qdrant_path if local else None,
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key,
            collection=settings.qdrant_collection,
            # MatchSubstring has one semantics (case-sensitive), like Chroma's $contains
            substring_mode="like",
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            ef_search=settings.hnsw_ef_search,  # the semantic stage's ef: Qdrant's hnsw_ef
            lock_timeout=settings.qdrant_lock_timeout,
        )
    return build_backend(name, substring_mode=settings.substring_mode)


@contextmanager
def opened_backend(name: str, settings: Settings) -> Iterator[VectorBackend]:
    """open_backend(name, settings) for the block; closed when it ends, also on an error."""
    backend = open_backend(name, settings)
    try:
        yield backend
    finally:
        backend.close()
