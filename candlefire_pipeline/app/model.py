"""The app's own embedding function as the collection's query model (`embedding_function=`).

The app hands in the function it hands Chroma (candle-fire: chromadb's
`SentenceTransformerEmbeddingFunction`, called as `ef(input) -> vectors`); `FunctionEmbedder`
puts it behind the project's embedder protocol (`model_id`, `dim`, `embed`). Query texts go
through `ef.embed_query` when it has one (Chroma's own query path), stored documents through
`ef(...)`; every row is L2-normalized (the stores hold unit vectors, and the pgvector term cache
matches kept entries by vector closeness; sentence-transformers does not normalize unless asked).
Nothing of the project's own query model is loaded: no ONNX export, no onnxruntime, no weights
hashed, no torch imported here. Before its first query on a store the function is checked
against that store's vectors (app/model_check.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from candlefire_pipeline.app.model_check import ModelContract


def _declared(function, method: str):
    """What `function.method()` says (None when it has no such method or it fails)."""
    call = getattr(function, method, None)
    if not callable(call):
        return None
    with warnings.catch_warnings():  # chromadb's base class warns that it is not overridden
        warnings.simplefilter("ignore")
        try:
            return call()
        except Exception:  # a description only: an app's function owes us none
            return None


def describe(function) -> str:
    """The function by its chromadb name() and config's model_name, else by its type."""
    name = _declared(function, "name")
    config = _declared(function, "get_config")
    model = config.get("model_name") if isinstance(config, dict) else None
    label = name if isinstance(name, str) and name else _type_name(function)
    return f"{label} (model_name {model!r})" if model else label


def _type_name(function) -> str:
    named = getattr(function, "__qualname__", None)  # a plain function or a class's method
    return f"function {named}" if isinstance(named, str) else type(function).__qualname__


def unit_rows(raw, count: int, what: str) -> np.ndarray:
    """The function's output as L2-normalized float32 rows, or a ValueError saying why not."""
    try:
        matrix = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} returned no list of vectors: {exc}") from None
    if matrix.ndim != 2 or matrix.shape[0] != count:
        raise ValueError(
            f"{what} returned an array of shape {matrix.shape} for {count} texts; "
            "an embedding function returns one vector per text"
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)


class FunctionEmbedder:
    """A chromadb-style embedding function behind the embedder protocol (unit float32 rows)."""

    #: not a runtime of the project's: the app's own function computes the vectors
    runtime = "app"

    def __init__(self, function) -> None:
        if not callable(function):
            raise TypeError(
                "embedding_function must be callable as chromadb's are (ef(input) -> vectors), "
                f"got {type(function).__name__}"
            )
        self.function = function
        self.description = describe(function)
        #: never a store's id: the store's own vectors vouch for the function (model_check.py)
        self.model_id = f"app function {self.description}"
        self._dim: int | None = None
        #: the function's verdict per store, made before its first query there
        self.contract = ModelContract(self)

    @property
    def dim(self) -> int:
        """The function's dimension (one probe text embedded when it never ran)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors: through `embed_query` when the function has one, as Chroma's query."""
        query = getattr(self.function, "embed_query", None)
        return self._rows(query if callable(query) else self.function, texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors, as Chroma made the stored ones: the function called on them."""
        return self._rows(self.function, texts)

    def _rows(self, call, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows = unit_rows(call(texts), len(texts), f"the embedding function {self.description}")
        self._dim = rows.shape[1]
        return rows

    def for_generation(self, settings, generation) -> FunctionEmbedder:
        """Every generation's query model: the app has one function, and each generation's
        store checks it against its own table before its first query."""
        return self


def function_embedder(function, embedder=None) -> FunctionEmbedder:
    """The app's function adapted; an error when an embedder is given as well."""
    if embedder is not None:
        raise ValueError(
            "open_collection takes an embedder or an embedding_function, not both: the "
            "function is the query model of every store it serves"
        )
    return FunctionEmbedder(function)
