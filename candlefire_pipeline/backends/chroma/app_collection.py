"""The collection the app serves, as a read-only store for the parity report's reference column.

It answers the read side exactly as the project's Chroma store does (candle-fire's metadata types
are read alike: `has_full_text` 0/1, `year` 0), with the model contract given by the caller (the
app's collection records none), and refuses every write. It opens the collection as it is:
nothing is created or modified, except the search effort when `ef_search` is given (only ever on
a snapshot, the pipeline's own copy of the app's folder).
"""

from __future__ import annotations

import logging
from pathlib import Path

from candlefire_pipeline.backends.chroma.backend import ChromaBackend

log = logging.getLogger(__name__)


class ReadOnlyStoreError(RuntimeError):
    """A write reached the app's collection, which the pipeline only ever reads."""


class AppCollectionBackend(ChromaBackend):
    name = "app_collection"

    def __init__(
        self,
        model: tuple[str, int],
        path: Path | None = None,
        host: str | None = None,
        port: int = 8000,
        collection: str = "als_papers",
        token: str | None = None,
        ssl: bool = False,
        ca_bundle: Path | None = None,
        ef_search: int | None = None,
    ) -> None:
        """`ef_search` (a snapshot only): the HNSW effort its queries walk with."""
        self._wanted_ef = ef_search
        super().__init__(path=path, host=host, port=port, collection=collection, token=token,
                         ssl=ssl, ca_bundle=ca_bundle)  # fmt: skip
        self._model = (model[0], int(model[1]))

    def _open_collection(self):
        collection = self._client.get_collection(self.collection_name, embedding_function=None)
        if self._wanted_ef is not None:
            current = (collection.configuration_json.get("hnsw") or {}).get("ef_search")
            if current != self._wanted_ef:
                collection.modify(configuration={"hnsw": {"ef_search": self._wanted_ef}})
                log.info("app collection snapshot: hnsw ef_search %s -> %s", current,
                         self._wanted_ef)  # fmt: skip
        return collection

    def stored_model(self) -> tuple[str, int] | None:
        return self._model

    def _refuse(self, *args, **kwargs):
        raise ReadOnlyStoreError(
            f"the app's collection {self.collection_name!r} is read, never written, here"
        )

    ensure_schema = replace_papers = delete_papers = reset = drop = _refuse
    chunk_hashes = paper_chunks = paper_hashes = _refuse
