"""The registry of generations (`data/generations.json`): read, frozen default, locked updates.

Without the file there is one implicit generation, `default`, whose identity is what the
settings say and whose targets and ledger are today's: a deployment from before generations
needs no rebuild. The first `generation create` writes the file with `default` frozen in it;
from then on the file is the truth.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from candlefire_pipeline.corpus.chunking import CHUNKER_VERSION
from candlefire_pipeline.fsutil import file_lock, write_atomic
from candlefire_pipeline.generations.identity import (
    DEFAULT_NAME,
    Generation,
    Identity,
    IndexLayout,
)
from candlefire_pipeline.settings import Settings

VERSION = 1


class GenerationError(ValueError):
    """An operator asked for a generation that does not exist or cannot do what was asked."""


@dataclass(frozen=True)
class Registry:
    """Every recorded generation in creation order; `stored` is False for the implicit one."""

    generations: tuple[Generation, ...]
    stored: bool

    def get(self, name: str) -> Generation:
        for generation in self.generations:
            if generation.name == name:
                return generation
        known = ", ".join(g.name for g in self.generations) or "none"
        raise GenerationError(f"no generation named {name!r}; known: {known}")

    @property
    def default(self) -> Generation:
        return next(g for g in self.generations if g.default)

    def live(self) -> list[Generation]:
        return [g for g in self.generations if g.live]

    def extra(self) -> list[Generation]:
        """The live generations besides the default (the ones with their own assets)."""
        return [g for g in self.live() if not g.default]

    def replaced(self, generation: Generation) -> Registry:
        """The registry with `generation` (same name) replaced or appended."""
        kept = [g for g in self.generations if g.name != generation.name]
        if len(kept) == len(self.generations):
            return Registry((*self.generations, generation), self.stored)
        return Registry(
            tuple(generation if g.name == generation.name else g for g in self.generations),
            self.stored,
        )


def settings_identity(settings: Settings, dim: int) -> Identity:
    """The identity the settings describe (the default generation before it is frozen)."""
    from candlefire_pipeline.embedding.model_files import embedding_identity

    layout = IndexLayout(
        settings.pg_ann.vector_type, settings.pg_ann.quantization, settings.hnsw_m,
        settings.hnsw_ef_construction,
    )  # fmt: skip
    embedding_id = embedding_identity(settings.model_id, settings.embed_runtime_bulk)
    return Identity(embedding_id, int(dim), CHUNKER_VERSION, layout)


def implicit_default(settings: Settings, dim: int) -> Generation:
    return Generation(
        name=DEFAULT_NAME,
        identity=settings_identity(settings, dim),
        model=settings.model_id,
        build_runtime=settings.embed_runtime_bulk,
        default=True,
    )


def stored_registry(settings: Settings) -> Registry | None:
    """The registry file, or None when there is none (only the implicit default)."""
    path = settings.generations_file
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        generations = tuple(Generation.from_dict(g) for g in data["generations"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise GenerationError(f"{path}: the generation registry is unreadable ({exc})") from None
    if data.get("version") != VERSION or sum(g.default for g in generations) != 1:
        raise GenerationError(f"{path}: not a version-{VERSION} registry with one default")
    return Registry(generations, stored=True)


def read_registry(settings: Settings, dim: Callable[[], int]) -> Registry:
    """The registry; `dim()` gives the model's dimension for the implicit default."""
    stored = stored_registry(settings)
    if stored is not None:
        return stored
    return Registry((implicit_default(settings, dim()),), stored=False)


def extra_generations(settings: Settings) -> list[Generation]:
    """Live generations besides the default ([] without a registry): their own assets."""
    stored = stored_registry(settings)
    return stored.extra() if stored is not None else []


def write_registry(settings: Settings, registry: Registry) -> None:
    data = {"version": VERSION, "generations": [g.to_dict() for g in registry.generations]}
    write_atomic(settings.generations_file, json.dumps(data, indent=2) + "\n")


@contextmanager
def registry_lock(settings: Settings) -> Iterator[None]:
    """One writer of the registry at a time (read, decide, write inside)."""
    path = settings.generations_file
    with file_lock(path.with_name(path.name + ".lock")):
        yield
