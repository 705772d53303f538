"""Query-path and bulk timings of embedding runtimes, interleaved in one process."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.common.corpus import entity_pool
from benchmarks.common.data import DOC_CHARS, scifact_queries, scifact_records
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.length_groups import padded_tokens
from candlefire_pipeline.embedding.onnx_embedder import OnnxEmbedder
from candlefire_pipeline.settings import Settings

ENTITY_NAMES = 12
#: fp32 ONNX with every request in one call padded to its longest text: the grouping before
#: length sorting, timed beside the product's to show what the grouping buys
ONE_CALL = "onnx, one padded call"
#: a call so dear in the cost model that every request that fits one call gets one
ONE_CALL_OVERHEAD_TOKENS = 1e9


def embedders(settings: Settings, runtimes: Sequence[str], batch_size: int) -> dict:
    return {
        runtime: load_embedder(settings.model_id, batch_size, runtime, settings.onnx_dir)
        for runtime in runtimes
    }


def query_requests(count: int) -> list[list[str]]:
    """`count` requests of 1 SciFact claim + 12 entity names (a different window each time)."""
    claims = [q.text for q in scifact_queries()]
    names = entity_pool([r["title"] for r in scifact_records()])
    requests = []
    for i in range(count):
        start = (i * 5) % (len(names) - ENTITY_NAMES)
        requests.append([claims[i % len(claims)], *names[start : start + ENTITY_NAMES]])
    return requests


def bulk_texts(count: int) -> list[str]:
    """`count` chunks of exactly 1,000 characters cut from consecutive SciFact abstracts."""
    stream = " ".join(f"{r['title']}. {r['abstract']}" for r in scifact_records()[: count * 2])
    texts = [stream[i * DOC_CHARS : (i + 1) * DOC_CHARS] for i in range(count)]
    if len(texts[-1]) < DOC_CHARS:
        raise ValueError(f"SciFact holds fewer than {count} chunks of {DOC_CHARS} characters")
    return texts


@dataclass(frozen=True)
class Timing:
    wall: list[float]
    cpu: list[float]

    def p(self, q: float) -> float:
        ordered = sorted(self.wall)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(calls: dict, repeats: int) -> dict[str, Timing]:
    """Each call once per round, the order rotated every round so drift hits all alike."""
    names = list(calls)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu = _timed(calls[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {n: Timing(walls[n], cpus[n]) for n in names}


def query_models(settings: Settings, runtimes: Sequence[str]) -> dict:
    """The runtimes' embedders as the query path builds them, and the one-call ONNX baseline."""
    models = {}
    for runtime, model in embedders(settings, runtimes, settings.embed_batch_size).items():
        models[runtime] = model
        if runtime == "onnx":
            models[ONE_CALL] = OnnxEmbedder(
                settings.model_id,
                settings.onnx_dir,
                batch_size=settings.embed_batch_size,
                call_overhead_tokens=ONE_CALL_OVERHEAD_TOKENS,
            )
    return models


@dataclass(frozen=True)
class TokenProfile:
    """Per request on average: model calls, padded tokens computed, real tokens."""

    calls: float
    padded: float
    real: float


def token_profile(model: OnnxEmbedder, requests: Sequence[Sequence[str]]) -> TokenProfile:
    """How `model` groups each request: the padding its calls compute beside the real tokens."""
    rows = []
    for request in requests:
        lengths = [len(e.ids) for e in model.encoder.tokenize(request)]
        groups = model.groups(lengths)
        rows.append((len(groups), padded_tokens(lengths, groups), sum(lengths)))
    return TokenProfile(*(statistics.mean(column) for column in zip(*rows, strict=True)))


def query_path(models: dict, repeats: int) -> dict[str, Timing]:
    """One request (query + 12 names) at a time, every model on the same requests."""
    requests = query_requests(repeats)
    for model in models.values():  # warm-up: first calls pay one-off allocations
        model.embed(requests[0])
    position = {name: 0 for name in models}

    def call(name):
        def run():
            models[name].embed(requests[position[name] % len(requests)])
            position[name] += 1

        return run

    return interleaved({name: call(name) for name in models}, repeats)


def bulk(
    settings: Settings, runtimes: Sequence[str], batch_sizes: Sequence[int], texts: list[str],
    repeats: int,
) -> dict[tuple[str, int], Timing]:  # fmt: skip
    """Seconds to embed all `texts` per (runtime, batch size)."""
    calls = {}
    for size in batch_sizes:
        for runtime, model in embedders(settings, runtimes, size).items():
            if hasattr(model, "max_tokens"):  # ONNX bounds tokens per call: `size` full texts
                model.max_tokens = size * model.encoder.max_seq_length
            model.embed(texts[:size])  # warm-up at this batch shape
            calls[(runtime, size)] = (lambda m: lambda: m.embed(texts))(model)
    return interleaved(calls, repeats)


def median_ms(timing: Timing) -> float:
    return statistics.median(timing.wall) * 1000
