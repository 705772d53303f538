"""The embedding sections of the settings: per-path runtimes and the Ray executor."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import (
    env_choice,
    env_int,
    env_positive_float,
    env_positive_int,
    env_str,
)

# -- embedding -------------------------------------------------------------------------------
#: Embedding runtime -> the vectors it makes. Runtimes making the same vectors share the model's
#: identity (store contract, cache key): fp32 ONNX is verified against torch at export time
#: (cosine >= 0.9999); a quantized runtime is an identity of its own.
EMBED_RUNTIMES = {"torch": "fp32", "onnx": "fp32", "onnx-int8": "int8"}


#: The faster runtime of each path as measured on this CPU (docs/BENCHMARKS.md, embedding-runtime).
DEFAULT_QUERY_RUNTIME = "onnx"


DEFAULT_BULK_RUNTIME = "onnx"


EMBED_PATHS = ("query", "bulk")


def _runtime(name: str, default: str) -> str:
    return env_choice(name, default, sorted(EMBED_RUNTIMES))


def embed_runtimes() -> dict[str, str]:
    """Per-path runtimes: CANDLEFIRE_EMBED_RUNTIME sets both, _QUERY / _BULK override one path.

    Both paths must make the same vectors, or queries would search a store of other vectors.
    """
    both = env_str("CANDLEFIRE_EMBED_RUNTIME")
    if both is not None:
        both = _runtime("CANDLEFIRE_EMBED_RUNTIME", both)
    query = _runtime("CANDLEFIRE_EMBED_RUNTIME_QUERY", both or DEFAULT_QUERY_RUNTIME)
    bulk = _runtime("CANDLEFIRE_EMBED_RUNTIME_BULK", both or DEFAULT_BULK_RUNTIME)
    if EMBED_RUNTIMES[query] != EMBED_RUNTIMES[bulk]:
        raise ValueError(
            f"CANDLEFIRE_EMBED_RUNTIME_QUERY ({query}) and CANDLEFIRE_EMBED_RUNTIME_BULK ({bulk})"
            f" make different vectors ({EMBED_RUNTIMES[query]} vs {EMBED_RUNTIMES[bulk]}): the"
            " query path must search vectors of its own kind; set both to the same precision"
        )
    return {"embed_runtime_query": query, "embed_runtime_bulk": bulk}


#: Where the embedding stage runs its model: in this process, or on Ray actors.
EMBED_EXECUTORS = ("in_process", "ray")
DEFAULT_EMBED_EXECUTOR = "in_process"


@dataclass(frozen=True)
class RaySettings:
    """The Ray cluster the embedding stage fans out to (CANDLEFIRE_EMBED_EXECUTOR=ray)."""

    #: `host:port` of the cluster's GCS (what `ray start --head` prints) or `ray://host:port`.
    address: str | None = None
    #: Actors per embedding step; each loads the model once and keeps it.
    actors: int = 2
    cpus_per_actor: float = 1.0
    #: Texts per Ray task: small enough to spread a batch, big enough to amortize a round trip.
    slice_texts: int = 128
    #: Ray restarts a dead actor and re-runs its in-flight task up to this many times.
    max_retries: int = 3
    connect_timeout_s: float = 10.0
    #: Bound on waiting for the actors to be placed and load the model.
    startup_timeout_s: float = 600.0


def embed_executor() -> str:
    """CANDLEFIRE_EMBED_EXECUTOR: "in_process" (default) or "ray"."""
    return env_choice("CANDLEFIRE_EMBED_EXECUTOR", DEFAULT_EMBED_EXECUTOR, EMBED_EXECUTORS)


def _ray_address() -> str | None:
    """RAY_ADDRESS as `host:port` or `ray://host:port`; ray's "auto"/"local" are refused because
    they silently start or find some other cluster."""
    address = env_str("RAY_ADDRESS")
    if address is None:
        return None
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"RAY_ADDRESS must be 'host:port' (the head's GCS address) or 'ray://host:port', "
            f"got {address!r}"
        )
    return address


def ray_settings() -> RaySettings:
    """The Ray section; RAY_ADDRESS is required only when the executor is ray."""
    address = _ray_address()
    if address is None and embed_executor() == "ray":
        raise ValueError("CANDLEFIRE_EMBED_EXECUTOR=ray needs RAY_ADDRESS (the head's host:port)")
    retries = env_int("CANDLEFIRE_RAY_MAX_RETRIES", RaySettings.max_retries)
    if retries < 0:
        raise ValueError(f"CANDLEFIRE_RAY_MAX_RETRIES must be >= 0, got {retries}")
    return RaySettings(
        address=address,
        actors=env_positive_int("CANDLEFIRE_RAY_ACTORS", RaySettings.actors),
        cpus_per_actor=env_positive_float(
            "CANDLEFIRE_RAY_CPUS_PER_ACTOR", RaySettings.cpus_per_actor
        ),
        slice_texts=env_positive_int("CANDLEFIRE_RAY_SLICE_TEXTS", RaySettings.slice_texts),
        max_retries=retries,
        connect_timeout_s=env_positive_float(
            "CANDLEFIRE_RAY_CONNECT_TIMEOUT", RaySettings.connect_timeout_s
        ),
        startup_timeout_s=env_positive_float(
            "CANDLEFIRE_RAY_STARTUP_TIMEOUT", RaySettings.startup_timeout_s
        ),
    )
