"""The app's collection, opened without writing a byte into it: a snapshot of its folder, or its
server, read in pages.

chromadb writes into any folder it opens (it creates `chroma.sqlite3` in a folder that is not
Chroma's, and another chromadb version migrates the file), so a folder is never opened in place:
it is copied once per fingerprint (every file's path, size and mtime) under the deployment's
adoption folder, and the copy is what chromadb opens. The fingerprint is taken again after the
copy: a folder that changed meanwhile (the app writing to it) is refused, never half-copied. A
server is only read (count, get, query); its fingerprint is its collection id, count and ends.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from candlefire_pipeline.backends.chroma.space import collection_space
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.fsutil import file_lock, remove_dead_temporaries, temporary_for
from candlefire_pipeline.settings import AppCollectionSettings

log = logging.getLogger(__name__)

SQLITE = "chroma.sqlite3"
COMPLETE = ".candlefire-snapshot"
ALL = ("documents", "metadatas", "embeddings")


class AdoptionError(ValueError):
    """The app's collection cannot be read or adopted as it is (the message says what, where)."""


@dataclass(frozen=True)
class AppPage:
    """One get() page, in the collection's insertion order; `start` is its first row's place."""

    start: int
    ids: list[str]
    documents: list | None
    metadatas: list | None
    embeddings: np.ndarray | None

    def __len__(self) -> int:
        return len(self.ids)


def folder_fingerprint(path: Path) -> str:
    """sha256 over every file's relative path, size and mtime: changes when a file does."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            if name == COMPLETE:
                continue
            full = Path(root) / name
            stat = full.stat()
            digest.update(
                f"{full.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


def check_chroma_folder(path: Path) -> None:
    if not path.is_dir():
        raise AdoptionError(f"the app's Chroma folder {path} does not exist")
    if not (path / SQLITE).is_file():
        raise AdoptionError(
            f"{path} is not a Chroma folder (no {SQLITE}): set CANDLEFIRE_APP_CHROMA_PATH to the "
            "folder candle-fire's indexer persisted (its CHROMA_DIR)"
        )


def snapshot(path: Path, snapshots_dir: Path) -> tuple[Path, str]:
    """(a copy of the app's folder that chromadb may open, the source's fingerprint); one copy
    per fingerprint, made once, older ones removed."""
    path = Path(path).resolve()
    check_chroma_folder(path)
    fingerprint = folder_fingerprint(path)
    target = snapshots_dir / f"snapshot-{fingerprint[:16]}"
    with file_lock(snapshots_dir / ".snapshot.lock"):
        if not (target / COMPLETE).is_file():
            _copy(path, target, fingerprint)
        for old in snapshots_dir.glob("snapshot-*"):
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
    return target, fingerprint


def discard_snapshot(snapshots_dir: Path, fingerprint: str) -> None:
    """Remove the snapshot of this fingerprint (input that cannot be adopted is kept nowhere)."""
    shutil.rmtree(snapshots_dir / f"snapshot-{fingerprint[:16]}", ignore_errors=True)


def _copy(path: Path, target: Path, fingerprint: str) -> None:
    tmp = temporary_for(target)
    remove_dead_temporaries(target)  # a killed copy's: up to the whole collection's size
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    log.info("copying the app's Chroma folder %s to %s", path, target)
    try:
        shutil.copytree(path, tmp)
        if folder_fingerprint(path) != fingerprint:
            raise AdoptionError(
                f"the app's Chroma folder {path} changed while it was copied (is the app or its "
                "indexer writing to it?); run again once it is quiet"
            )
        (tmp / COMPLETE).write_text(fingerprint)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def current_fingerprint(settings: AppCollectionSettings) -> str:
    """The app collection's fingerprint now, without copying or opening a folder."""
    if settings.path is not None:
        check_chroma_folder(Path(settings.path))
        return folder_fingerprint(Path(settings.path))
    with AppCollection(settings, Path("/nonexistent")) as source:  # a server needs no snapshot
        return source.fingerprint


class AppCollection:
    """The app's collection, read-only: `count`, `pages`, `get`; close() when done."""

    def __init__(self, settings: AppCollectionSettings, snapshots_dir: Path) -> None:
        if not settings.configured:
            raise AdoptionError(
                "no app collection is configured: set CANDLEFIRE_APP_CHROMA_PATH (its folder) or "
                "CANDLEFIRE_APP_CHROMA_HOST (its server)"
            )
        self.settings, self.where = settings, settings.where
        self.snapshot_path: Path | None = None
        self._client = None
        if settings.path is not None:
            self.snapshot_path, self.fingerprint = snapshot(settings.path, Path(snapshots_dir))
        try:
            self._open()
        except AdoptionError:
            self.discard()
            raise

    def _open(self) -> None:
        # chromadb is imported here, not at module level: the gates read adoption_now() on the
        # app's serving path, which must not pay for importing Chroma when pgvector serves.
        from candlefire_pipeline.backends.chroma.client import ChromaServerAccess, open_client

        if self.snapshot_path is not None:
            self._client = _open(lambda: open_client(self.snapshot_path, None), self.where)
        else:
            app = self.settings
            server = ChromaServerAccess(app.host, app.port, app.token, app.ssl, app.ca_bundle)
            self._client = open_client(None, server)
        self.collection = self._collection()
        if self.snapshot_path is None:
            self.fingerprint = self._server_fingerprint()

    def discard(self) -> None:
        """Close; remove the snapshot (a copy of input that cannot be adopted is kept nowhere)."""
        self.close()
        if self.snapshot_path is not None:
            shutil.rmtree(self.snapshot_path, ignore_errors=True)

    def _collection(self):
        try:
            collection = self._client.get_collection(
                self.settings.collection, embedding_function=None
            )
        except Exception as exc:  # chromadb raises NotFoundError, ValueError, ... by version
            names = _names(self._client)
            raise AdoptionError(
                f"the app's Chroma at {self.where} has no collection {self.settings.collection!r} "
                f"({type(exc).__name__}); it holds: {', '.join(names) or 'no collection'} "
                "(set CANDLEFIRE_APP_COLLECTION)"
            ) from None
        space = collection_space(collection)
        if space != "cosine":
            raise AdoptionError(
                f"the collection {self.settings.collection!r} at {self.where} measures {space!r} "
                "distance; candle-fire's indexer creates it with cosine, and every store here "
                "compares cosine similarity: is it the collection the app serves?"
            )
        return collection

    def _server_fingerprint(self) -> str:
        count = self.count()
        ends = [self.collection.get(limit=1, offset=at, include=[])["ids"]
                for at in {0, max(count - 1, 0)}]  # fmt: skip
        parts = [str(self.collection.id), str(count), repr(sorted(map(tuple, ends)))]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def count(self) -> int:
        return self.collection.count()

    def pages(self, include: Sequence[str] = ALL, page_rows: int | None = None,
              start: int = 0) -> Iterator[AppPage]:  # fmt: skip
        """Every row from `start` on, in insertion order, `page_rows` at a time; the next page is
        read while the caller works on this one (chromadb's get runs outside the GIL)."""
        size = page_rows or self.settings.page_rows

        def read(offset: int) -> dict:
            return self.collection.get(limit=size, offset=offset, include=list(include))

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="app-pages") as reader:
            offset, pending = start, reader.submit(read, start)
            while True:
                page = pending.result()
                if not page["ids"]:
                    return
                pending = reader.submit(read, offset + len(page["ids"]))
                yield _page(offset, page, include)
                offset += len(page["ids"])

    def get(self, ids: Sequence[str], include: Sequence[str] = ALL) -> AppPage:
        """These rows (those that exist), in insertion order."""
        return _page(0, self.collection.get(ids=list(ids), include=list(include)), include)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> AppCollection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _open(opener, where: str):
    try:
        return opener()
    except BackendUnavailableError as exc:
        raise AdoptionError(
            f"the app's Chroma folder at {where} cannot be opened: {exc} (a damaged or foreign "
            f"{SQLITE}?)"
        ) from None


def _names(client) -> list[str]:
    try:
        return sorted(c.name for c in client.list_collections())
    except Exception:  # the listing is only a hint in an error message
        return []


def _page(start: int, page: dict, include: Sequence[str]) -> AppPage:
    embeddings = page.get("embeddings") if "embeddings" in include else None
    if embeddings is not None:
        embeddings = np.asarray(embeddings, dtype=np.float32)  # stored float32, returned as f64
    return AppPage(
        start=start,
        ids=[str(i) for i in page["ids"]],
        documents=page.get("documents") if "documents" in include else None,
        metadatas=page.get("metadatas") if "metadatas" in include else None,
        embeddings=embeddings,
    )
