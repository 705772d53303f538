"""Following the serving switch from an app process: what serves, re-decided when the file changes.

Every app-facing read path (operations/reader.py's ServingReader, app/collection.py's collection)
asks `SwitchFollower.current()` once per request: one stat of the switch file; only when it
changed is the file read again and, when the (backend, generation) it names changed, the new
target opened (before the old one is closed: a failure to open keeps serving the old one). An
unreadable switch serves Chroma of the default generation (the rollback floor) and says so, or
pgvector when the file still shows Chroma retired.
CANDLEFIRE_SERVING_BACKEND is the emergency lever on the default generation: "chroma" forces
Chroma; "pgvector" is refused unless the latest parity report passes every gate now.
With CANDLEFIRE_SWITCH_SOURCE=postgres (a Space sharing no disk with the pipeline) the switch is
the copy the pipeline publishes in Postgres (operations/serving/published.py), read again at
most every CANDLEFIRE_SWITCH_POLL_MS.
With CANDLEFIRE_PG_READ_DSN (a streaming replica) pgvector is read there, and a new pgvector
target is taken only once the replica has replayed the switch's change
(operations/serving/replication.py: until then the previous target keeps serving).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, Self, TypeVar

from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.generations.view import generation_embedder, generation_settings
from candlefire_pipeline.operations.serving.state import (
    PROMOTED,
    ServingState,
    Target,
    read_state,
    salvaged_retirement,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, REFERENCE

log = logging.getLogger(__name__)

Served = TypeVar("Served")
#: (target, the generation's settings, its query embedder) -> the thing that serves it
Opener = Callable[[Target, Settings, Any], Served]


class ServingRefusedError(RuntimeError):
    """The reader will not serve what was asked (e.g. forcing pgvector without a passing report)."""


def file_signature(path) -> tuple | None:
    """What changes when the switch file is replaced or rewritten (None: no file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class SwitchSource:
    """Where the switch is read (CANDLEFIRE_SWITCH_SOURCE): its file, or the copy published in the
    Postgres the app reads. `signature()` is what changes when the switch does."""

    def __init__(self, settings: Settings) -> None:
        self.path, mode = settings.serving_file, settings.app_client.switch_source
        dsn = settings.replica.read_dsn if settings.replica.configured else settings.pg_dsn
        if mode == "postgres" and not dsn:
            raise ValueError("CANDLEFIRE_SWITCH_SOURCE=postgres needs CANDLEFIRE_PG_DSN: the "
                             "switch is published in the serving Postgres")  # fmt: skip
        self.published = None
        if mode == "postgres":
            from candlefire_pipeline.operations.serving.published import PublishedSwitch

            self.published = PublishedSwitch(dsn, settings.pg_table, settings.app_client)

    def signature(self) -> tuple:
        if self.published is None:
            return ("file", file_signature(self.path))
        return self.published.signature()

    def state(self) -> ServingState:
        return read_state(self.path) if self.published is None else self.published.state()

    def salvaged(self) -> dict:
        if self.published is None:
            return salvaged_retirement(self.path)
        return self.published.salvaged()

    def generation(self, settings: Settings, name: str):
        if self.published is not None:
            return self.published.generation(name)
        # the registry (and the lifecycle's code) loads only when a generation serves
        from candlefire_pipeline.operations.generations.lifecycle import registry

        return registry(settings).get(name)

    def close(self) -> None:
        if self.published is not None:
            self.published.close()


class SwitchFollower(Generic[Served]):
    """The served object for the target the switch names; reopened only when the target changes.

    `open_served(target, settings, embedder)` builds it from the generation's settings and query
    embedder; `close_served` releases it. `make_embedder(settings, generation)` gives a
    generation's query embedder (kept per generation across switches); the default generation's
    is the one given.
    """

    def __init__(
        self,
        settings: Settings,
        embedder,
        open_served: Opener,
        close_served: Callable[[Served], None],
        make_embedder: Callable[[Settings, Any], Any] | None = None,
        on_switch: Callable[[ServingState, Target], None] | None = None,
    ) -> None:
        self.settings = settings
        self._open, self._close = open_served, close_served
        self._make_embedder = make_embedder or (lambda s, g: generation_embedder(s, g, "query"))
        #: told every time the switch is read again (what a retirement changes besides the target)
        self._on_switch = on_switch
        #: concurrent requests share the follower: one of them re-reads the switch at a time
        self._switching = threading.Lock()
        self._seen: tuple | None | bool = False  # False: never read
        self.served: Served | None = None
        self.target: Target | None = None
        self.state: ServingState | None = None
        #: generation name -> its query embedder (the default's is the one given)
        self._embedders = {DEFAULT_NAME: embedder}
        self.source = SwitchSource(settings)
        #: the read replica's replay position (None: pgvector is read where it is written)
        self.replica = None
        if settings.replica.configured:
            from candlefire_pipeline.operations.serving.replication import ReplicaGate

            self.replica = ReplicaGate(settings.replica)

    def current(self) -> tuple[Served, Target]:
        """What serves this request and the target it reads (one decision per request)."""
        seen = self.source.signature()
        with self._switching:
            if self.served is None or seen != self._seen:
                self._switch(seen)
            return self.served, self.target

    def _switch(self, seen) -> None:
        state = self._read_state()
        wanted = self._choose(state)
        moving = wanted != self.target or self.served is None
        if moving and not self._replica_holds(state, wanted):
            return  # the previous target serves; the switch is read again on the next request
        self.state = state
        if moving:
            view, embedder = self._generation(wanted.generation)
            served = self._open(wanted, view, embedder)  # open first: a failure keeps the old
            self._release()
            self.served, self.target = served, wanted
            log.info("serving reads from %s (%s)", wanted, self.state.describe())
        if self.state.degraded and wanted == self.state.target:
            log.warning("serving from %s", self.state.describe())
        if self._on_switch is not None:
            self._on_switch(self.state, wanted)
        self._seen = seen

    def _replica_holds(self, state: ServingState, wanted: Target) -> bool:
        """Whether what the switch names is on the read replica (always, without one)."""
        if self.replica is None:
            return True
        return self.replica.ready_for(state, wanted, served=self.served is not None)

    def _generation(self, name: str):
        """(settings, query embedder) of a generation: the follower's own for the default."""
        if name == DEFAULT_NAME:
            return self._read_from(self.settings), self._embedders[DEFAULT_NAME]
        generation = self.source.generation(self.settings, name)
        if name not in self._embedders:
            self._embedders[name] = self._make_embedder(self.settings, generation)
        view = generation_settings(self.settings, generation)
        return self._read_from(view), self._embedders[name]

    def _read_from(self, view: Settings) -> Settings:
        """The settings the served store opens with: pgvector on the replica when one is set."""
        if self.replica is None:
            return view
        return replace(view, pg_dsn=self.settings.replica.read_dsn)

    def _read_state(self) -> ServingState:
        try:
            return self.source.state()
        except ValueError as exc:
            # Chroma is the place to fall back to (the rollback target), unless it is retired
            retired = self.source.salvaged()
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
        # the emergency lever reads the latest parity evaluation: only this branch loads parity
        from candlefire_pipeline.operations.parity import latest_evaluation
        from candlefire_pipeline.parity.gates import failed

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

    def _release(self) -> None:
        if self.served is not None:
            self._close(self.served)
        self.served = None

    def close(self) -> None:
        self._release()
        self.target = None
        self.source.close()
        if self.replica is not None:
            self.replica.close()


class FollowsSwitch:
    """An app-facing read path: it serves through its SwitchFollower and closes with it."""

    _follower: SwitchFollower

    def close(self) -> None:
        self._follower.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
