"""Embedding on a Ray cluster: actors that each load the model once, texts sent in ordered slices.

`RayEmbedder` has the Embedder shape (`model_id`, `dim`, `embed(texts)`), so the embedding stage
and its cache do not know where the model runs: the stage sends only cache misses, and the
vectors come back in input order.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from candlefire_pipeline.settings import RaySettings

logger = logging.getLogger(__name__)

#: Settings a worker must see to build the same embedder (model, batch, runtime options).
_FORWARDED_ENV_PREFIX = "CANDLEFIRE_EMBED_"
#: The executor choice is the driver's business; a worker only ever embeds in-process.
_NOT_FORWARDED = {"CANDLEFIRE_EMBED_EXECUTOR"}
_CONNECT_LOCK = threading.Lock()
_connected_address: str | None = None


class RayUnavailableError(RuntimeError):
    """The Ray cluster named by RAY_ADDRESS cannot be reached or cannot host the actors."""


class RayEmbeddingError(RuntimeError):
    """Embedding on Ray failed for good (retries exhausted, or the model raised)."""


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast with the address in the message: ray.init itself retries for minutes."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RayUnavailableError(
            f"Ray cluster at RAY_ADDRESS={address} is unreachable ({exc}); start the cluster "
            "or point RAY_ADDRESS at its head (host:port)"
        ) from exc


def connect(address: str, timeout_s: float) -> None:
    """Connect this process to the cluster at `address` (once; again if the address changed)."""
    global _connected_address
    with _CONNECT_LOCK:
        if _connected_address != address:
            check_reachable(address, timeout_s)
        import ray

        if ray.is_initialized() and _connected_address == address:
            return
        if ray.is_initialized():
            ray.shutdown()
        logger.info("connecting to the Ray cluster at %s", address)
        ray.init(
            address=address,
            namespace="candlefire",
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        _connected_address = address


def disconnect() -> None:
    """Drop this process's Ray connection (tests; a later connect() starts afresh)."""
    global _connected_address
    import ray

    with _CONNECT_LOCK:
        if ray.is_initialized():
            ray.shutdown()
        _connected_address = None


def forwarded_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The embedding settings of this process, for the workers' runtime env."""
    environ = os.environ if environ is None else environ
    return {
        key: value
        for key, value in environ.items()
        if key.startswith(_FORWARDED_ENV_PREFIX) and key not in _NOT_FORWARDED
    }


class EmbedWorker:
    """The body of one Ray actor: builds the embedder once, then embeds slices."""

    def __init__(self, embedder_kwargs: dict[str, Any]) -> None:
        from candlefire_pipeline.embedding.embedders import load_embedder

        self._embedder = load_embedder(**embedder_kwargs)
        self._calls = 0
        self._texts = 0

    def identity(self) -> tuple[str, int, int]:
        """(model_id, dim, pid) of this incarnation of the actor."""
        return self._embedder.model_id, self._embedder.dim, os.getpid()

    def embed(self, texts: list[str]) -> np.ndarray:
        self._calls += 1
        self._texts += len(texts)
        return self._embedder.embed(texts)

    def stats(self) -> dict[str, int]:
        """Calls and texts since this incarnation started (a restart resets them)."""
        return {"calls": self._calls, "texts": self._texts, "pid": os.getpid()}


class RayEmbedder:
    """An Embedder whose model runs on Ray actors; `embed` keeps the input order."""

    def __init__(
        self,
        embedder_kwargs: dict[str, Any],
        ray_settings: RaySettings,
        expected_model_id: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not ray_settings.address:
            raise ValueError("RayEmbedder needs a Ray address (RAY_ADDRESS)")
        self.address = ray_settings.address
        self.settings = ray_settings
        self.tasks_sent = 0
        self.slices_done = 0
        connect(self.address, ray_settings.connect_timeout_s)
        self._actors = self._start_actors(embedder_kwargs, dict(env or {}))
        try:
            self.model_id, self.dim = self._identify(expected_model_id)
        except BaseException:
            self.close()
            raise

    def _start_actors(self, embedder_kwargs: dict[str, Any], env: dict[str, str]) -> list:
        import ray

        options: dict[str, Any] = {
            "num_cpus": self.settings.cpus_per_actor,
            # Ray restarts a killed actor and re-runs the task it was running: embedding is a
            # pure function of the texts, so a re-run cannot duplicate or reorder anything.
            "max_restarts": self.settings.max_retries,
            "max_task_retries": self.settings.max_retries,
        }
        if env:
            options["runtime_env"] = {"env_vars": env}
        actor_class = ray.remote(EmbedWorker).options(**options)
        return [actor_class.remote(embedder_kwargs) for _ in range(self.settings.actors)]

    def _identify(self, expected_model_id: str | None) -> tuple[str, int]:
        import ray
        from ray.exceptions import GetTimeoutError

        try:
            identities = ray.get(
                [actor.identity.remote() for actor in self._actors],
                timeout=self.settings.startup_timeout_s,
            )
        except GetTimeoutError as exc:
            raise RayUnavailableError(
                f"{self.settings.actors} embedding actor(s) of {self.settings.cpus_per_actor} "
                f"CPU did not start within {self.settings.startup_timeout_s:.0f} s on the Ray "
                f"cluster at {self.address} (cluster resources: {ray.cluster_resources()})"
            ) from exc
        except ray.exceptions.RayError as exc:
            raise RayEmbeddingError(
                f"embedding actors failed to load the model on the Ray cluster at "
                f"{self.address}: {exc}"
            ) from exc
        models = {(model_id, dim) for model_id, dim, _ in identities}
        if len(models) != 1:
            raise RayEmbeddingError(f"Ray embedding actors disagree on the model: {models}")
        ((model_id, dim),) = models
        if expected_model_id is not None and model_id != expected_model_id:
            raise RayEmbeddingError(
                f"Ray workers embed with {model_id!r} but this pipeline records "
                f"{expected_model_id!r}: install the same model and settings on the workers"
            )
        return model_id, int(dim)

    def _slices(self, texts: Sequence[str]) -> list[list[str]]:
        size = self.settings.slice_texts
        return [list(texts[start : start + size]) for start in range(0, len(texts), size)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        import ray
        from ray.util import ActorPool

        def submit(actor, part: list[str]):
            self.tasks_sent += 1
            return actor.embed.remote(part)

        parts = []
        try:
            # ActorPool.map hands each slice to an idle actor and yields results in input order.
            for vectors in ActorPool(self._actors).map(submit, self._slices(texts)):
                parts.append(np.asarray(vectors, dtype=np.float32))
                self.slices_done += 1
        except ray.exceptions.RayError as exc:
            raise RayEmbeddingError(
                f"embedding {len(texts)} texts on the Ray cluster at {self.address} failed "
                f"after up to {self.settings.max_retries} retries per task: {exc}"
            ) from exc
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def actor_pids(self) -> list[int]:
        """The worker process of each actor right now (a restarted actor has a new one)."""
        import ray

        return [pid for _, _, pid in ray.get([a.identity.remote() for a in self._actors])]

    def stats(self) -> list[dict[str, int]]:
        """Per actor: calls and texts of its current incarnation, and its pid."""
        import ray

        return ray.get([actor.stats.remote() for actor in self._actors])

    def close(self) -> None:
        """Stop the actors (the connection stays for the next step in this process)."""
        import ray

        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors = []

    def __enter__(self) -> RayEmbedder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
