"""Whether a query model is the one a store was built with, before its first query there.

The project's own embedder is trusted by its recorded id (the store's meta says which model
made its vectors). The app's embedding function (app/model.py) has no such id: it must
reproduce the store's vectors. Before its first query on a store (a pgvector table, a Chroma
collection; a promoted generation's table is a store of its own) the store's first SAMPLE
chunks in insertion order are read in one round trip and their documents embedded by the
function: the dimension must be the store's and every cosine with the stored vector at least
MIN_COSINE, or the store refuses the function by name (QueryModelMismatchError) before
answering anything. A store without a chunk has nothing to compare: only the dimension of the
first query's vectors is checked, and a log line says so.

MIN_COSINE, from the real packaged all-MiniLM-L6-v2 on 300 conformance chunks: the function
(sentence-transformers on torch) against the pipeline's ONNX export, or against candle-fire's
own stored vectors, gives cosines >= 0.9999999 (>= 0.99999994 on 200 short query texts and
entity names); against the onnx-int8 export (stored under another identity, "...@onnx-int8")
0.991-0.995; a model of the same dimension that is not this one (feature hashing; MiniLM's
vectors rotated, or their dimensions reversed) |cos| <= 0.23, and the same model on another
chunk's text at most 0.61. 0.999 accepts the model on any fp32 runtime with 1e-3 to spare
(10,000 times the runtimes' difference) and refuses everything else, int8 vectors included, as
the project's own identity rule does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from candlefire_pipeline.backends.common import BackendUnavailableError

log = logging.getLogger(__name__)

#: The least cosine between a stored vector and the function's vector of the same document.
MIN_COSINE = 0.999
#: Stored chunks compared (the first in insertion order: the same ones on every start).
SAMPLE = 3

#: k -> up to k (document, stored vector) pairs of the store, in insertion order
Sampler = Callable[[int], Sequence[tuple[str, object]]]


class QueryModelMismatchError(BackendUnavailableError):
    """The app's embedding function is not the model of a store's vectors: refused by name."""


def embed_checked(embedder, store: str, model: tuple[str, int] | None, sample: Sampler,
                  texts: Sequence[str]) -> np.ndarray:  # fmt: skip
    """The texts' query vectors, from an embedder known to be the store's model.

    `store` names it ("pgvector table 'chunks'"), `model` is its recorded (model id, dim) or
    None, `sample` reads its stored chunks (only for an app function, once per store)."""
    contract = getattr(embedder, "contract", None)
    if contract is None:  # the project's embedder: the id its vectors are recorded under
        if model is not None and embedder.model_id != model[0]:
            raise BackendUnavailableError(
                f"{store} holds vectors of {model[0]!r}; the query embedder is "
                f"{embedder.model_id!r}"
            )
        return embedder.embed(list(texts))
    compared = contract.check(store, model, sample)
    vectors = embedder.embed(list(texts))
    if not compared and model is not None and vectors.shape[1] != int(model[1]):
        raise QueryModelMismatchError(
            f"{_holds(store, model)}; the app's embedding function {embedder.description} "
            f"gives {vectors.shape[1]}-dim vectors. Only the dimension could be checked (the "
            "store has no chunk yet). Refused before any answer: hand in the store's model, "
            "or leave embedding_function out to use the project's query model"
        )
    return vectors


class ModelContract:
    """An app function's verdicts per store: a store that passed is not read again; a refusal
    is measured again on the next query (the store may have been rebuilt meanwhile)."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self._passed: set[tuple] = set()
        self._told_empty: set[tuple] = set()
        self._lock = threading.Lock()  # concurrent first queries check once

    def check(self, store: str, model: tuple[str, int] | None, sample: Sampler) -> bool:
        """True once the function reproduces the store's vectors; False for a store with no
        chunk (nothing compared); QueryModelMismatchError when it does not."""
        key = (store, model)
        if key in self._passed:
            return True
        with self._lock:
            if key in self._passed:
                return True
            started = time.perf_counter()
            stored = list(sample(SAMPLE))
            read = time.perf_counter() - started
            if not stored:
                self._say_empty(key, store, model)
                return False
            dim, cosines = self._measure(stored, model)
            embedded = time.perf_counter() - started - read
            if dim != _stored_dim(stored, model) or min(cosines) < MIN_COSINE:
                raise QueryModelMismatchError(self._refusal(store, model, stored, dim, cosines))
            self._passed.add(key)
        log.info(
            "%s: the app's embedding function %s reproduces its vectors (dim %d, cosines %s "
            ">= %s on its first %d chunks); checked once in %.1f ms: one read %.1f ms, %d "
            "documents embedded %.1f ms", store, self.embedder.description, dim,
            _cosines(cosines), MIN_COSINE, len(stored), (read + embedded) * 1000, read * 1000,
            len(stored), embedded * 1000,
        )  # fmt: skip
        return True

    def _measure(self, stored, model) -> tuple[int, list[float]]:
        """The function's dimension on the stored documents, and each cosine (none when the
        dimensions differ)."""
        made = self.embedder.embed_documents([document for document, _ in stored])
        kept = np.array([np.asarray(vector, dtype=np.float64) for _, vector in stored])
        if made.shape[1] != kept.shape[1]:
            return made.shape[1], [float("nan")]
        kept /= np.maximum(np.linalg.norm(kept, axis=1, keepdims=True), 1e-12)
        return made.shape[1], [float(c) for c in np.sum(made.astype(np.float64) * kept, axis=1)]

    def _refusal(self, store, model, stored, dim: int, cosines: list[float]) -> str:
        held = _stored_dim(stored, model)
        found = (f"{dim}-dim vectors where the store's are {held}-dim" if dim != held else
                 f"cosines {_cosines(cosines)} with its first {len(stored)} stored chunks "
                 f"(at least {MIN_COSINE} for the same model)")  # fmt: skip
        return (
            f"{_holds(store, model)}; the app's embedding function {self.embedder.description} "
            f"does not make them: it gives {found}. Refused before any answer: hand in the "
            "store's model, or leave embedding_function out to use the project's query model"
        )

    def _say_empty(self, key: tuple, store: str, model) -> None:
        if key not in self._told_empty:
            self._told_empty.add(key)
            log.warning(
                "%s has no chunk to check the app's embedding function %s against: only the "
                "dimension of its query vectors is checked (%s)", store,
                self.embedder.description, f"the store's is {model[1]}" if model else "unknown",
            )  # fmt: skip


def _holds(store: str, model: tuple[str, int] | None) -> str:
    if model is None:
        return f"{store} holds vectors of a model it does not record"
    return f"{store} holds vectors of {model[0]!r} (dim {model[1]})"


def _stored_dim(stored, model) -> int:
    return int(model[1]) if model is not None else len(np.asarray(stored[0][1]))


def _cosines(cosines: list[float]) -> str:
    return "[" + ", ".join(f"{c:.7f}" for c in cosines) + "]"


def pg_sample(conn, names, k: int) -> list[tuple[str, np.ndarray]]:
    """The table's first k chunks in insertion order (document, vector): one statement."""
    from psycopg import sql  # here: a Chroma-serving app never loads the Postgres driver's SQL

    from candlefire_pipeline.backends.pg.sql import SEQ_COLUMN

    statement = sql.SQL("SELECT document, embedding FROM {t} ORDER BY {seq} LIMIT %s").format(
        t=names.ident(), seq=sql.Identifier(SEQ_COLUMN)
    )
    rows = conn.execute(statement, [k]).fetchall()
    return [(document, _array(vector)) for document, vector in rows]


def _array(vector) -> np.ndarray:
    """A stored vector as numpy (pgvector's Vector, or a list when no adapter is registered)."""
    to_numpy = getattr(vector, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else vector, dtype=np.float32)


def chroma_sample(collection, k: int) -> list[tuple[str, np.ndarray]]:
    """The collection's first k records (document, vector): one get."""
    got = collection.get(limit=k, include=["documents", "embeddings"])
    return list(zip(got["documents"], got["embeddings"], strict=True))
