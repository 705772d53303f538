"""A generation's batch files: the drop's facts linked in, its own chunks and embeddings.

The files are exactly those the ledger and apply code read, so the generation's ledger is the
existing one pointed at its own directory (docs/GENERATIONS.md, section 2).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from candlefire_pipeline.corpus.chunking import CHUNKER_VERSION
from candlefire_pipeline.corpus.drops import ChunksSummary, write_chunks
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.embedding import EmbeddingCache, EmbeddingSummary, write_embeddings
from candlefire_pipeline.fsutil import is_hidden
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import batches_dir
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

#: Facts of a drop every generation shares: what it accepts (supersession) and deletes.
DROP_FILES = ("papers.parquet", "deleted.parquet")


def drop_chunker(settings: Settings) -> str:
    """The chunker of the drops' own chunks.parquet: the default generation's."""
    registry = stored_registry(settings)
    return registry.default.identity.chunker if registry is not None else CHUNKER_VERSION


def link(source: Path, target: Path) -> None:
    """`target` becomes the same file as `source` (a hard link; a copy across file systems)."""
    if target.exists() and os.path.samefile(source, target):
        return
    tmp = target.with_name(target.name + ".link")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    os.replace(tmp, target)


def ingested(settings: Settings, key: str) -> Path:
    """The drop's batch directory; a clear error when the drop was never ingested."""
    drop_dir = settings.drop_batches_dir / key
    if not (drop_dir / "papers.parquet").is_file():
        raise FileNotFoundError(f"drop {key!r} has not been ingested (no papers in {drop_dir})")
    return drop_dir


def _link_drop(settings: Settings, generation: Generation, key: str) -> tuple[Path, bool]:
    """The generation's batch dir with the drop's facts linked in (and its chunks, when the
    chunker is the drops'); True when the generation chunks on its own."""
    drop_dir = ingested(settings, key)
    out = batches_dir(settings, generation) / key
    if generation.default:
        return out, False
    out.mkdir(parents=True, exist_ok=True)
    for name in DROP_FILES:
        link(drop_dir / name, out / name)
    if generation.identity.chunker != drop_chunker(settings):
        return out, True
    if not (drop_dir / "chunks.parquet").is_file():
        raise FileNotFoundError(f"drop {key!r} has no chunks yet: materialize chunks first")
    link(drop_dir / "chunks.parquet", out / "chunks.parquet")
    return out, False


def prepare_chunks(
    settings: Settings, generation: Generation, key: str
) -> tuple[Path, ChunksSummary | None]:
    """The generation's batch dir holding the drop's facts and chunks for its chunker: linked
    (summary None) when that is the drops' chunker, else written from the linked papers."""
    out, own = _link_drop(settings, generation, key)
    return out, (write_chunks(out, generation.identity.chunker) if own else None)


def embed_batch(
    settings: Settings,
    generation: Generation,
    key: str,
    embedder,
    cache: EmbeddingCache,
    **stage,
) -> EmbeddingSummary:
    """Embeddings of one drop for the generation, from its chunks (linked, or written by its
    own chunker beforehand: prepare_chunks)."""
    out, own = _link_drop(settings, generation, key)
    if own and not (out / "chunks.parquet").is_file():
        raise FileNotFoundError(
            f"{generation.name}: drop {key!r} has no chunks by {generation.identity.chunker} "
            "yet: materialize the generation's chunks first"
        )
    return write_embeddings(out / "chunks.parquet", out / "embeddings.parquet", embedder, cache,
                            **stage)  # fmt: skip


def ingested_keys(settings: Settings) -> list[str]:
    """Every drop with papers (ingested), in batch-key order."""
    root = settings.drop_batches_dir
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir()
                  if not is_hidden(d) and (d / "papers.parquet").is_file())  # fmt: skip


def behind(
    settings: Settings, generation: Generation, stores: Iterable[str]
) -> dict[str, list[str]]:
    """store -> the ingested drops its copy of the generation has not applied since they last
    changed (no applied marker, or one older than the drop's papers.parquet): its ledger lag."""
    keys = ingested_keys(settings)
    gen_dir = batches_dir(settings, generation)
    lag: dict[str, list[str]] = {}
    for store in stores:
        applied = StoreLedger(gen_dir, store).applied()
        lag[store] = [
            key
            for key in keys
            if key not in applied
            or applied[key] < (settings.drop_batches_dir / key / "papers.parquet").stat().st_mtime
        ]
    return lag


def remove_files(settings: Settings, generation: Generation, say: Callable[[str], None]) -> None:
    """Delete the generation's folder (batch files, ledger, reports); never the drops'."""
    if generation.default:
        raise ValueError("the default generation's files are the drops' own: never removed")
    folder = batches_dir(settings, generation).parent
    if folder.exists():
        shutil.rmtree(folder)
        say(f"removed {folder}")
