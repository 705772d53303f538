"""A generation seen as Settings: its physical targets, its ledger directory, its model.

Every existing operation (open_backend, apply_batch, repair, the store checks, the oracle,
parity) takes Settings; a generation is those Settings with its own table and collections, its
own batches directory (hence its own ledger) and its own model and layout. The default
generation keeps the configured names and `data/batches`, so a deployment from before
generations is the default generation as it stands.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from candlefire_pipeline.embedding.embedders import embedder_for
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.settings import EMBED_RUNTIMES, Settings


def generation_dir(settings: Settings, generation: Generation) -> Path:
    return settings.generations_dir / generation.gid


def batches_dir(settings: Settings, generation: Generation) -> Path:
    """The generation's batch files and applied markers (its ledger)."""
    if generation.default:
        return settings.drop_batches_dir
    return generation_dir(settings, generation) / "batches"


def reports_dir(settings: Settings, generation: Generation) -> Path:
    """Where the generation's comparison reports are written."""
    return generation_dir(settings, generation) / "reports"


def targets(settings: Settings, generation: Generation) -> dict[str, str]:
    """store -> the table / collection holding this generation (derived from the base names)."""
    suffix = "" if generation.default else f"_{generation.gid}"
    return {
        "pgvector": settings.pg_table + suffix,
        "chroma": settings.chroma_collection + suffix,
        "qdrant": settings.qdrant_collection + suffix,
    }


def _runtime(configured: str, generation: Generation) -> str:
    """The configured runtime when it makes the generation's vectors (fp32 torch and onnx are
    interchangeable: a speed choice), else the one the generation was built with."""
    if EMBED_RUNTIMES[configured] == EMBED_RUNTIMES[generation.build_runtime]:
        return configured
    return generation.build_runtime


def generation_settings(settings: Settings, generation: Generation) -> Settings:
    """The settings every operation uses for this generation (from the base settings)."""
    names = targets(settings, generation)
    layout = generation.identity.layout
    return replace(
        settings,
        model_id=generation.model,
        embed_runtime_query=_runtime(settings.embed_runtime_query, generation),
        embed_runtime_bulk=_runtime(settings.embed_runtime_bulk, generation),
        pg_table=names["pgvector"],
        chroma_collection=names["chroma"],
        qdrant_collection=names["qdrant"],
        hnsw_m=layout.hnsw_m,
        hnsw_ef_construction=layout.hnsw_ef_construction,
        pg_ann=replace(
            settings.pg_ann, vector_type=layout.vector_type, quantization=layout.quantization
        ),
        batches_dir_override=None if generation.default else batches_dir(settings, generation),
    )


def generation_embedder(settings: Settings, generation: Generation, path: str):
    """The generation's embedder on the "query" or "bulk" path."""
    return embedder_for(generation_settings(settings, generation), path)
