"""Opens a backend by name from Settings; the only place that maps names to classes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import BACKEND_NAMES

if TYPE_CHECKING:
    from candlefire_pipeline.backends.pg.layout import AnnParams


def backend_class(name: str) -> type[VectorBackend]:
    """The class behind a backend name (imported on use: Chroma and Qdrant are heavy)."""
    if name == "pgvector":
        from candlefire_pipeline.backends.pg.backend import PgVectorBackend

        return PgVectorBackend
    if name == "chroma":
        from candlefire_pipeline.backends.chroma.backend import ChromaBackend

        return ChromaBackend
    if name == "qdrant":
        from candlefire_pipeline.backends.qdrant.backend import QdrantBackend

        return QdrantBackend
    if name == "memory":
        from candlefire_pipeline.backends.memory import MemoryBackend

        return MemoryBackend
    raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}")


def build_backend(name: str, *args, **options) -> VectorBackend:
    """A backend of kind `name` from explicit constructor arguments (tests, benchmarks, tools)."""
    return backend_class(name)(*args, **options)


def pg_ann_params(settings: Settings) -> AnnParams:
    """The pgvector driver's ANN parameters from the validated CANDLEFIRE_PG_* / HNSW_* settings."""
    from candlefire_pipeline.backends.pg.layout import AnnParams

    return AnnParams(**asdict(settings.pg_ann))


def open_backend(name: str, settings: Settings) -> VectorBackend:
    """A connected backend (one of BACKEND_NAMES) configured by settings; the caller closes it."""
    if name == "pgvector":
        from candlefire_pipeline.backends.pg.server import resolve_dsn

        return build_backend(
            "pgvector",
            resolve_dsn(settings),
            table=settings.pg_table,
            substring_mode=settings.substring_mode,
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            ann=pg_ann_params(settings),
        )
    if name == "chroma":
        local = settings.chroma_host is None
        return build_backend(
            "chroma",
            path=settings.chroma_path if local else None,
            host=settings.chroma_host,
            port=settings.chroma_port,
            collection=settings.chroma_collection,
            token=settings.chroma_token,
            ssl=settings.chroma_ssl,
            ca_bundle=settings.chroma_ca_bundle,
            # $contains has one semantics (case-sensitive); the setting chooses pgvector's and the
            # oracle's, and the parity report counts where they differ from Chroma's.
            substring_mode="like",
        )
    if name == "qdrant":
        local = settings.qdrant_url is None
        return build_backend(
            "qdrant",
            path=settings.qdrant_path if local else None,
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key,
            collection=settings.qdrant_collection,
            # MatchSubstring has one semantics (case-sensitive), like Chroma's $contains
            substring_mode="like",
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            ef_search=settings.pg_ann.ef_search,  # the semantic stage's ef (hnsw_ef)
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
