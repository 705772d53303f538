"""The app-facing read path: a Retriever on the (backend, generation) the serving switch names.

The app keeps a ServingReader and calls `retrieve(...)` (or `retriever()`) per request; the
switch file is re-read when it changes (a stat per call), so a rollback takes effect on the next
request. A generation other than the default is read from its own target with its own settings
and query embedder (another model needs its own query vectors). CANDLEFIRE_SERVING_BACKEND is
the emergency lever (on the default generation): "chroma" forces Chroma; "pgvector" is refused
unless the latest parity report passes every gate now. With CANDLEFIRE_SHADOW_RATE > 0,
`retrieve` also hands a share of requests to the shadow worker (operations/shadow/served.py), which
replays them on the stores that do not serve; the answer never waits for that. Shadow reads
compare the default generation's stores, so they are offered only while it serves, and only
when a store is left to replay on (a retired Chroma is not). Forcing a retired Chroma is refused.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import astuple

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.lifecycle import generation_embedder, registry
from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.operations.serving.state import (
    PROMOTED,
    ServingState,
    Target,
    read_state,
    salvaged_retirement,
)
from candlefire_pipeline.operations.shadow.served import (
    ShadowWorker,
    shadow_targets,
    shared_worker,
)
from candlefire_pipeline.parity.gates import failed
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.retrieval.vector_cache import QueryVectorCache
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

log = logging.getLogger(__name__)


def _listed(terms: Sequence[str] | None) -> list[str] | None:
    """None stays None: the app's rule takes the terms from the query text."""
    return None if terms is None else list(terms)


class ServingRefusedError(RuntimeError):
    """The reader will not serve what was asked (e.g. forcing pgvector without a passing report)."""


def _signature(path) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class ServingReader:
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
        #: concurrent requests share the reader: one of them re-reads the switch at a time
        self._switching = threading.Lock()
        self._seen: tuple | None | bool = False  # False: never read
        self._backend: VectorBackend | None = None
        self._retriever: Retriever | None = None
        self.state: ServingState | None = None
        self.backend_name: str | None = None
        self.generation: str | None = None
        #: generation name -> its query embedder (the default's is the one given)
        self._embedders = {DEFAULT_NAME: embedder}
        #: None: the process-wide worker, started on the first request if the rate is > 0
        self._shadow = shadow
        #: whether a store is left to replay on (decided with the switch: a retirement ends it)
        self._replayable = False

    @property
    def shadow(self) -> ShadowWorker | None:
        if self._shadow is None and self.settings.shadow.enabled:
            self._shadow = shared_worker(self.settings)
        return self._shadow

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
        seen = _signature(self.settings.serving_file)
        with self._switching:
            if self._retriever is None or seen != self._seen:
                self._switch(seen)
            return self._retriever, self.backend_name, self.generation

    def _switch(self, seen) -> None:
        self.state = self._read_state()
        wanted = self._choose(self.state)
        if wanted != Target(self.backend_name, self.generation) or self._retriever is None:
            view, embedder = self._generation(wanted.generation)
            backend = self._opener(wanted.backend, view)  # open first: a failure keeps the old
            self._close_backend()
            self._backend, self.backend_name, self.generation = backend, *astuple(wanted)
            self._retriever = Retriever(backend, embedder, self.settings.retrieval,
                                        self.reranker, self.vector_cache)  # fmt: skip
            log.info("serving reads from %s (%s)", wanted, self.state.describe())
        if self.state.degraded and wanted == self.state.target:
            log.warning("serving from %s", self.state.describe())
        self._replayable = bool(shadow_targets(self.settings, wanted.backend))
        self._seen = seen

    def _generation(self, name: str):
        """(settings, query embedder) of a generation: the reader's own for the default."""
        if name == DEFAULT_NAME:
            return self.settings, self.embedder
        generation = registry(self.settings).get(name)
        if name not in self._embedders:
            self._embedders[name] = generation_embedder(self.settings, generation, "query")
        return generation_settings(self.settings, generation), self._embedders[name]

    def _read_state(self) -> ServingState:
        try:
            return read_state(self.settings.serving_file)
        except ValueError as exc:
            # Chroma is the place to fall back to (the rollback target), unless it is retired
            retired = salvaged_retirement(self.settings.serving_file)
            if retired:
                log.error("%s; Chroma is retired: serving from pgvector", exc)
                return ServingState(PROMOTED, retired=retired)
            log.error("%s; serving from Chroma", exc)
            return ServingState()

    def _choose(self, state: ServingState) -> Target:
        override = self.settings.serving_override
        if override is None or override == state.backend:
            return state.target
        if override == REFERENCE:
            if state.reference_retired is not None:
                raise ServingRefusedError(
                    f"CANDLEFIRE_SERVING_BACKEND=chroma refused: "
                    f"{state.reference_retired.describe(REFERENCE)}, not written; "
                    '`candlefire unretire chroma --reason "..."` restores it'
                )
            log.warning("CANDLEFIRE_SERVING_BACKEND=chroma overrides the switch (%s)", state.target)
            return Target(REFERENCE)
        report, gates = latest_evaluation(self.settings)
        names = failed(gates)
        if report is None or names:
            why = "there is no parity report" if report is None else f"failed gates: {names}"
            raise ServingRefusedError(
                f"CANDLEFIRE_SERVING_BACKEND=pgvector refused: {why}; the switch says "
                f"{state.describe()}"
            )
        log.warning("CANDLEFIRE_SERVING_BACKEND=pgvector overrides the switch (report %s)",
                    report.report_id)  # fmt: skip
        return Target(CANDIDATE)

    def _close_backend(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self._backend, self._retriever = None, None

    def close(self) -> None:
        self._close_backend()
        self.backend_name = self.generation = None

    def __enter__(self) -> ServingReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
