"""A chromadb 1.5 Collection, read side, served by whatever the serving switch names.

`ServingCollection` answers `count`, `get` and `query` as the project's Chroma collection does
(app/calls.py checks the arguments, app/pg_store.py and app/chroma_store.py answer), follows the
switch like ServingReader (operations/serving/follow.py: a stat per call, one decision per call,
a rollback takes effect on the next call) and refuses every write call by name. Query texts are
embedded with the serving generation's model, at most one embedder call per `query`: the texts
it embedded before come from a bounded LRU keyed by the model's identity (the reader's
CANDLEFIRE_QUERY_VECTOR_CACHE: an assistant's entity names and spelling variants recur, and
their vector alone or in a batch differs by < 1e-6); the model is loaded on the first `query`
that needs it, not at open.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from candlefire_pipeline.app.calls import GET_INCLUDE, QUERY_INCLUDE, get_call, query_call
from candlefire_pipeline.app.filters import UnsupportedCallError
from candlefire_pipeline.app.metrics import CallMeter, process_metrics
from candlefire_pipeline.app.model import function_embedder
from candlefire_pipeline.app.shadow import CallShadow
from candlefire_pipeline.app.stores import open_store
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.generations.view import generation_embedder
from candlefire_pipeline.operations.serving.follow import FollowsSwitch, SwitchFollower
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.retrieval.vector_cache import QueryVectorCache
from candlefire_pipeline.settings import Settings

#: chromadb Collection calls that write: refused by name, never passed to a store.
WRITE_CALLS = ("add", "upsert", "update", "delete", "modify", "fork")


class ReadOnlyCollectionError(UnsupportedCallError):
    """A write call on the serving collection: the app reads, the pipeline writes."""


class LazyEmbedder:
    """An embedder built on its first use (the app's cold start pays no model load for
    count / get); the build runs once even with concurrent first callers."""

    def __init__(self, build) -> None:
        self._build, self._made, self._lock = build, None, threading.Lock()

    def _embedder(self):
        with self._lock:
            if self._made is None:
                self._made = _project_model(self._build)
            return self._made

    @property
    def model_id(self) -> str:
        return self._embedder().model_id

    @property
    def dim(self) -> int:
        return self._embedder().dim

    def embed(self, texts):
        return self._embedder().embed(texts)


def _project_model(build):
    """The project's own query model, or (an install without the libraries it needs: the slim
    one) a ModuleNotFoundError that says what to do."""
    try:
        return build()
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"the project's query model needs {exc.name!r}, which is not installed here: hand in "
            "the app's own (open_collection(embedding_function=...)), or install "
            "'candlefire_pipeline[onnx]' and name the stores' model in CANDLEFIRE_EMBED_MODEL "
            '(docs/APP.md, "Where the query model comes from")',
            name=exc.name,
        ) from exc


def _close(store) -> None:
    store.close()


def _once(make):
    """`make()` on the first call, the same value after."""
    made = []

    def value():
        if not made:
            made.append(make())
        return made[0]

    return value


class ServingCollection(FollowsSwitch):
    """count / get / query of chromadb 1.5's Collection, on the store the switch serves."""

    def __init__(self, settings: Settings, embedder=None, opener=open_store, shadow=None, *,
                 embedding_function=None) -> None:  # fmt: skip
        from candlefire_pipeline.embedding import embedder_for

        self.settings = settings
        default = embedder or LazyEmbedder(lambda: embedder_for(settings, "query"))
        per_generation = lambda s, g: LazyEmbedder(lambda: generation_embedder(s, g, "query"))  # noqa: E731
        if embedding_function is not None:  # the app's own model: nothing of ours is loaded
            default = function_embedder(embedding_function, embedder)
            per_generation = default.for_generation
        self._follower = SwitchFollower(settings, default, opener, _close,
                                        make_embedder=per_generation)  # fmt: skip
        self._shadow = CallShadow(settings, shadow)
        client = settings.app_client
        self._meter = CallMeter(process_metrics(client.metrics_port)
                                if client.metrics == "prometheus" else None)  # fmt: skip
        #: texts' query vectors across calls, per model identity (retrieval/vector_cache.py)
        self.vector_cache = QueryVectorCache(settings.retrieval.query_vector_cache)

    @property
    def target(self) -> Target | None:
        """The (backend, generation) the last call read (None before the first)."""
        return self._follower.target

    @property
    def answered(self) -> dict[str, int]:
        """How the serving store answered this collection's calls (pgvector: "kept" from the
        term cache, "kept after computing", "sql"; {} for Chroma or before the first call)."""
        return dict(getattr(self._follower.served, "answered", {}))

    def request(self):
        """`with collection.request():` around the calls of one app request: its latency, calls
        and round trips are one observation of the request metrics (app/metrics.py)."""
        return self._meter.request()

    def _serving(self, call: str):
        """(store, target) for this call; a failure to open one counts as the call's error."""
        try:
            return self._follower.current()
        except Exception as exc:
            self._meter.failed(call, exc)
            raise

    def count(self) -> int:
        store, target = self._serving("count")
        with self._meter.call("count", store, target):
            return store.count()

    def get(self, ids=None, where=None, limit=None, offset=None, where_document=None,
            include=GET_INCLUDE) -> dict:  # fmt: skip
        call = get_call(ids, where, limit, offset, where_document, include)
        store, target = self._serving("get")
        started = time.perf_counter()
        with self._meter.call("get", store, target):
            answer = store.get(call)
        self._offer(target, call, None, answer, started)
        return answer

    def query(self, query_embeddings=None, query_texts=None, query_images=None, query_uris=None,
              ids=None, n_results=10, where=None, where_document=None,
              include=QUERY_INCLUDE) -> dict:  # fmt: skip
        call = query_call(query_embeddings, query_texts, n_results, where, where_document,
                          include, query_images=query_images, query_uris=query_uris,
                          ids=ids)  # fmt: skip
        store, target = self._serving("query")
        started = time.perf_counter()
        vectors = _once(lambda: call.vectors if call.texts is None
                        else self._embedded(store, call.texts))  # fmt: skip
        with self._meter.call("query", store, target):
            answer = store.query(call, vectors)  # embeds only when the store asks Postgres
        self._offer(target, call, vectors, answer, started)
        return answer

    def _embedded(self, store, texts: tuple[str, ...]) -> np.ndarray:
        """The texts' vectors: kept ones from the cache, the others in one embedder call."""
        identity = store.model
        found = self.vector_cache.get_many(identity, texts) if identity is not None else {}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            made = dict(zip(missing, store.embed(tuple(missing)), strict=True))
            if identity is not None:
                self.vector_cache.put_many(identity, made)
            found |= made
        return np.stack([found[t] for t in texts]).astype(np.float32)

    def _offer(self, target: Target, call, vectors, answer: dict, started: float) -> None:
        # the shadow replays on the default generation's stores: another one is not comparable
        if target.generation == DEFAULT_NAME:
            seconds = time.perf_counter() - started
            self._shadow.offer(target.backend, call, vectors, answer, seconds)

    def __getattr__(self, name: str):
        raise AttributeError(
            f"ServingCollection has no {name!r}: it answers count(), get() and query() "
            "(chromadb 1.5's read calls) and refuses the write calls"
        )


def _refused(name: str):
    def write(self, *args, **kwargs):
        raise ReadOnlyCollectionError(
            f"{name}() is refused: the serving collection only reads (count, get, query); "
            "the pipeline writes the stores"
        )

    write.__name__ = name
    return write


for _name in WRITE_CALLS:
    setattr(ServingCollection, _name, _refused(_name))
