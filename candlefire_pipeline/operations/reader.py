"""The app-facing read path: a Retriever on the (backend, generation) the serving switch names.

The app keeps a ServingReader and calls `retrieve(...)` (or `retriever()`) per request; the
switch file is re-read when it changes (a stat per call), so a rollback takes effect on the next
request. A generation other than the default is read from its own target with its own settings
and query embedder (another model needs its own query vectors). How the switch is followed (and
the CANDLEFIRE_SERVING_BACKEND lever) is operations/serving/follow.py's, shared with the app's
Chroma-compatible collection (app/). With CANDLEFIRE_SHADOW_RATE > 0,
`retrieve` also hands a share of requests to the shadow worker (operations/shadow/served.py), which
replays them on the stores that do not serve; the answer never waits for that. Shadow reads
compare the default generation's stores, so they are offered only while it serves, and only
when a store is left to replay on (a retired Chroma is not). Forcing a retired Chroma is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.serving.follow import (
    FollowsSwitch,
    ServingRefusedError,
    SwitchFollower,
)
from candlefire_pipeline.operations.serving.state import ServingState, Target
from candlefire_pipeline.operations.shadow.served import (
    ShadowWorker,
    shadow_targets,
    shared_worker,
)
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.retrieval.vector_cache import QueryVectorCache
from candlefire_pipeline.settings import Settings

__all__ = ["ServingReader", "ServingRefusedError"]


def _listed(terms: Sequence[str] | None) -> list[str] | None:
    """None stays None: the app's rule takes the terms from the query text."""
    return None if terms is None else list(terms)


class ServingReader(FollowsSwitch):
    """Retriever for the backend the switch names; reopens the backend when the switch changes."""

    def __init__(
        self,
        settings: Settings,
        embedder=None,
        reranker=None,
        opener: Callable[[str, Settings], VectorBackend] = open_backend,
        shadow: ShadowWorker | None = None,
    ) -> None:
        if embedder is None:
            from candlefire_pipeline.embedding import embedder_for

            embedder = embedder_for(settings, "query")
        self.settings, self.embedder, self._opener = settings, embedder, opener
        self.reranker = reranker or load_reranker(settings.retrieval.reranker_model)
        #: one cache for every Retriever this reader builds: a switch keeps the names' vectors
        self.vector_cache = QueryVectorCache(settings.retrieval.query_vector_cache)
        self._follower = SwitchFollower(
            settings, embedder, self._open_retriever, _close_retriever, on_switch=self._switched
        )
        #: None: the process-wide worker, started on the first request if the rate is > 0
        self._shadow = shadow
        #: whether a store is left to replay on (decided with the switch: a retirement ends it)
        self._replayable = False

    @property
    def shadow(self) -> ShadowWorker | None:
        if self._shadow is None and self.settings.shadow.enabled:
            self._shadow = shared_worker(self.settings)
        return self._shadow

    @property
    def state(self) -> ServingState | None:
        """The switch as last read (None before the first request)."""
        return self._follower.state

    @property
    def backend_name(self) -> str | None:
        target = self._follower.target
        return None if target is None else target.backend

    @property
    def generation(self) -> str | None:
        target = self._follower.target
        return None if target is None else target.generation

    def retrieve(
        self, query: str, entity_names: Sequence[str] = (), terms: Sequence[str] | None = None
    ) -> Retrieval:
        """One request on the serving backend (arguments as Retriever.retrieve's); maybe
        replayed in the shadow afterwards."""
        retriever, served, generation = self._current()
        started = time.perf_counter()
        answer = retriever.retrieve(query, list(entity_names), _listed(terms))
        seconds = time.perf_counter() - started
        # the shadow replays on the default generation's stores: another one is not comparable
        shadow = self.shadow if generation == DEFAULT_NAME and self._replayable else None
        if shadow is not None:  # offer() never raises and never blocks
            shadow.offer(served, query, entity_names, terms, answer, seconds)
        return answer

    def retriever(self) -> Retriever:
        """The Retriever to use for this request."""
        return self._current()[0]

    def _current(self) -> tuple[Retriever, str, str]:
        """The Retriever for this request, the store and generation it reads (one decision)."""
        retriever, target = self._follower.current()
        return retriever, target.backend, target.generation

    def _switched(self, state: ServingState, target: Target) -> None:
        """Whether a store is left to replay on (decided with the switch: a retirement ends it)."""
        self._replayable = bool(shadow_targets(self.settings, target.backend))

    def _open_retriever(self, target: Target, view: Settings, embedder) -> Retriever:
        backend = self._opener(target.backend, view)
        return Retriever(backend, embedder, self.settings.retrieval, self.reranker,
                         self.vector_cache)  # fmt: skip


def _close_retriever(retriever: Retriever) -> None:
    retriever.backend.close()
