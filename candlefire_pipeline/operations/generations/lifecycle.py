"""Operator verbs on generations without Dagster: create one, and what each one holds now."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.chunking import chunker
from candlefire_pipeline.embedding import embedder_for, embedding_identity, load_embedder
from candlefire_pipeline.generations.batches import behind, drop_chunker
from candlefire_pipeline.generations.identity import Generation, Identity, IndexLayout
from candlefire_pipeline.generations.registry import (
    GenerationError,
    Registry,
    read_registry,
    registry_lock,
    settings_identity,
    write_registry,
)
from candlefire_pipeline.generations.sizes import store_bytes
from candlefire_pipeline.generations.view import (
    generation_embedder as generation_embedder,  # re-exported: it moved to generations/view.py
)
from candlefire_pipeline.generations.view import generation_settings, targets
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.operations.serving.state import ServingState, read_state
from candlefire_pipeline.settings import EMBED_RUNTIMES, Settings
from candlefire_pipeline.settings.env import check_choice

log = logging.getLogger(__name__)

SERVING, ROLLBACK_TARGET = "serving", "rollback target"


def registry(settings: Settings) -> Registry:
    """The registry, with the implicit default's dimension read from the configured model."""
    return read_registry(settings, lambda: embedder_for(settings, "bulk").dim)


def _switch(settings: Settings) -> ServingState:
    try:
        return read_state(settings.serving_file)
    except ValueError as exc:  # the reader serves Chroma of the default then, and so do we
        log.warning("%s: counted as serving the default generation", exc)
        return ServingState()


def serving_target(settings: Settings) -> tuple[str, str]:
    """(backend, generation) the switch serves now (Chroma of the default when unset)."""
    target = _switch(settings).target
    return target.backend, target.generation


def serving_and_rollback(settings: Settings) -> tuple[tuple[str, str], tuple[str, str]]:
    """(backend, generation) that serves now and the one a rollback returns to, in one read."""
    state = _switch(settings)
    serving, back = state.target, state.rollback_target
    return (serving.backend, serving.generation), (back.backend, back.generation)


def roles(settings: Settings) -> dict[str, str]:
    """generation name -> its role in serving: serving, or the rollback target."""
    state = _switch(settings)
    return {state.rollback_target.generation: ROLLBACK_TARGET, state.generation: SERVING}


def _check_default_stores(settings: Settings, default: Generation) -> None:
    """Before freezing the default: every fed store holds its model (or nothing yet)."""
    wanted = (default.identity.embedding_id, default.identity.dim)
    for store in written_stores(settings):
        try:
            backend = open_backend(store, settings)
            try:
                stored = backend.stored_model()
            finally:
                backend.close()
        except Exception as exc:
            raise GenerationError(
                f"cannot freeze the default generation: {store} is unreachable ({exc}); the "
                "first `generation create` checks that every store holds the configured model"
            ) from None
        if stored is not None and tuple(stored) != wanted:
            raise GenerationError(
                f"{store} holds {stored[0]} ({stored[1]}-dim) but the settings describe "
                f"{wanted[0]} ({wanted[1]}-dim): set CANDLEFIRE_EMBED_MODEL / _RUNTIME to what "
                "the stores hold, so that the default generation is what serves today"
            )


def new_identity(
    settings: Settings, model: str, runtime: str, layout: IndexLayout, chunker_version: str
) -> Identity:
    """The identity of a generation to create; the dimension is read from the model."""
    check_choice("runtime", runtime, sorted(EMBED_RUNTIMES))
    chunker(chunker_version)
    embedder = load_embedder(
        model, batch_size=settings.embed_batch_size, runtime=runtime, onnx_dir=settings.onnx_dir
    )
    return Identity(embedding_identity(model, runtime), int(embedder.dim), chunker_version, layout)


def create_generation(
    settings: Settings,
    name: str,
    model: str,
    runtime: str | None = None,
    layout: IndexLayout | None = None,
    chunker_version: str | None = None,
    actor: str = "unknown",
) -> Generation:
    """Record a new generation (building it is a separate step); freezes the default first."""
    runtime = runtime or settings.embed_runtime_bulk
    if layout is None:
        layout = settings_identity(settings, 1).layout
    identity = new_identity(
        settings, model, runtime, layout, chunker_version or drop_chunker(settings)
    )
    with registry_lock(settings):
        current = registry(settings)
        if not current.stored:
            _check_default_stores(settings, current.default)
        if name in {g.name for g in current.generations}:
            raise GenerationError(f"a generation named {name!r} exists (names are never reused)")
        for other in current.live():
            if other.gid == identity.gid:
                raise GenerationError(
                    f"generation {other.name!r} already has this identity ({identity.gid}: "
                    f"{identity.describe()}): it is the same index"
                )
        created = Generation(
            name, identity, model, runtime, created_at=datetime.now(UTC).isoformat(),
            created_by=actor,
        )  # fmt: skip
        write_registry(settings, Registry(current.replaced(created).generations, stored=True))
    log.info("generation %s (%s) created: %s", name, identity.gid, identity.describe())
    return created


def environment_drift(settings: Settings, default: Generation) -> str | None:
    """Why the environment no longer describes the frozen default generation, or None."""
    from dataclasses import replace

    described = settings_identity(settings, default.identity.dim)
    if replace(described, dim=default.identity.dim) == default.identity:
        return None
    return (
        f"the environment describes {described.describe()} but the default generation is "
        f"{default.identity.describe()}: the registry wins (to change the index, create a "
        "generation; to silence this, set CANDLEFIRE_EMBED_MODEL / _RUNTIME / "
        "CANDLEFIRE_PG_VECTOR_TYPE / _QUANTIZATION / CANDLEFIRE_HNSW_* back)"
    )


@dataclass
class GenerationStatus:
    """What `generation list` shows for one generation."""

    generation: Generation
    role: str = ""
    targets: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, int] = field(default_factory=dict)
    lag: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """live generations: building (some store lags) or ready; else the registry state."""
        if not self.generation.live:
            return self.generation.state
        return "building" if any(self.lag.values()) or self.errors else "ready"


def inspect_generation(
    settings: Settings, generation: Generation, role: str = ""
) -> GenerationStatus:
    status = GenerationStatus(generation, role, targets(settings, generation))
    if not generation.live:
        return status
    view = generation_settings(settings, generation)
    stores = written_stores(settings)  # a retired store is not opened: its files may be gone
    status.lag = {s: len(keys) for s, keys in behind(settings, generation, stores).items()}
    for store in stores:
        try:
            backend = open_backend(store, view)
            try:
                status.chunks[store] = backend.count()
                status.bytes[store] = store_bytes(store, view, backend)
            finally:
                backend.close()
        except Exception as exc:
            status.errors[store] = f"{type(exc).__name__}: {exc}"
    return status


def inspect_generations(settings: Settings) -> list[GenerationStatus]:
    """Every recorded generation (the implicit default without a registry), with its role."""
    known = roles(settings)
    return [
        inspect_generation(settings, g, known.get(g.name, ""))
        for g in registry(settings).generations
    ]
