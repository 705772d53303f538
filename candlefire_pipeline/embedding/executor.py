"""Chooses where the embedding stage runs its model (CANDLEFIRE_EMBED_EXECUTOR), in one place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from candlefire_pipeline.embedding.embedders import Embedder, load_embedder
from candlefire_pipeline.embedding.model_files import embedding_identity
from candlefire_pipeline.settings import Settings

#: The stage's default read batch (rows of chunks.parquet embedded per call).
DEFAULT_READ_BATCH = 1024


def stage_read_batch(settings: Settings) -> int:
    """Rows per embed call: on Ray, enough for one slice per actor, so every actor has work."""
    if settings.embed_executor != "ray":
        return DEFAULT_READ_BATCH
    return max(DEFAULT_READ_BATCH, settings.ray.actors * settings.ray.slice_texts)


def embedder_kwargs(settings: Settings) -> dict:
    """What load_embedder needs; the same dict builds the in-process and the Ray workers' model."""
    return {
        "model_id": settings.model_id,
        "batch_size": settings.embed_batch_size,
        "runtime": settings.embed_runtime("bulk"),
        "onnx_dir": settings.onnx_dir,
    }


@contextmanager
def stage_embedder(settings: Settings) -> Iterator[Embedder]:
    """The embedder of the embedding stage: in this process (default) or on Ray actors.

    Either way the model identity recorded with the vectors is the in-process one, so a store
    never mixes vectors of two models; Ray actors are stopped when the block ends.
    """
    kwargs = embedder_kwargs(settings)
    if settings.embed_executor != "ray":
        yield load_embedder(**kwargs)
        return
    from candlefire_pipeline.embedding.ray_executor import RayEmbedder, forwarded_env

    with RayEmbedder(
        kwargs,
        settings.ray,
        expected_model_id=embedding_identity(settings.model_id, kwargs["runtime"]),
        env=forwarded_env(),
    ) as embedder:
        yield embedder
