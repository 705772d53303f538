"""The collection's calls answered by the real Chroma collection, read only.

The collection is opened as it is (never created, never modified: not even the ef_search the
writer's store would set) and only `count`, `get` and `query` reach it, with the filters as the
app gave them (already checked against the served subset). Query texts are embedded here with
the serving generation's model, as the collection's embedding function would.
"""

from __future__ import annotations

import numpy as np

from candlefire_pipeline.app.calls import GetCall, QueryCall
from candlefire_pipeline.app.model_check import chroma_sample, embed_checked
from candlefire_pipeline.backends.chroma.client import ChromaServerAccess, open_client
from candlefire_pipeline.backends.chroma.space import check_cosine
from candlefire_pipeline.backends.common import BackendUnavailableError, check_dim
from candlefire_pipeline.settings import Settings


class ChromaCollectionStore:
    """A Chroma collection behind the read calls only."""

    name = "chroma"

    def __init__(self, settings: Settings, embedder) -> None:
        self.embedder = embedder
        server = None
        if settings.chroma_host is not None:
            server = ChromaServerAccess(settings.chroma_host, settings.chroma_port,
                                        settings.chroma_token, settings.chroma_ssl,
                                        settings.chroma_ca_bundle)  # fmt: skip
        where = server.url if server else str(settings.chroma_path)
        self._client = open_client(None if server else settings.chroma_path, server)
        try:
            self._collection = self._client.get_collection(
                settings.chroma_collection, embedding_function=None
            )
        except Exception as exc:  # chromadb raises NotFoundError / ValueError across versions
            self._client.close()
            raise BackendUnavailableError(
                f"Chroma collection {settings.chroma_collection!r} at {where} cannot be opened "
                f"for reading: {exc}"
            ) from None
        check_cosine(self._collection, where)
        meta = self._collection.metadata or {}
        self.model = (meta["model_id"], int(meta["dim"])) if "model_id" in meta else None

    def embed(self, texts: tuple[str, ...]) -> np.ndarray:
        """The texts' query vectors from the collection's model (app/model_check.py)."""
        where = f"Chroma collection {self._collection.name!r}"
        return embed_checked(self.embedder, where, self.model,
                             lambda k: chroma_sample(self._collection, k), texts)  # fmt: skip

    def count(self) -> int:
        return self._collection.count()

    def get(self, call: GetCall) -> dict:
        return self._collection.get(
            ids=None if call.ids is None else list(call.ids),
            where=call.raw_where,
            where_document=call.raw_where_document,
            limit=call.limit,
            offset=call.offset or None,
            include=list(call.include),
        )

    def query(self, call: QueryCall, vectors) -> dict:
        """`vectors`: the query vectors, or a function giving them."""
        vectors = vectors() if callable(vectors) else vectors
        check_dim(self.model, vectors.shape[1])
        return self._collection.query(
            query_embeddings=vectors,
            n_results=call.n_results,
            where=call.raw_where,
            where_document=call.raw_where_document,
            include=list(call.include),
        )

    def close(self) -> None:
        self._client.close()
