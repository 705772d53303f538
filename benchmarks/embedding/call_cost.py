"""What one ONNX call costs beyond its padded tokens: a least-squares fit over batch shapes.

Prints the fit behind CALL_OVERHEAD_TOKENS in candlefire_pipeline/embedding/onnx_embedder.py.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass

import numpy as np

from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.onnx_embedder import run_session
from candlefire_pipeline.settings import Settings

#: (texts, width) shapes of the query path: a dozen names of 3-12 tokens, a query of 10-60
SHAPES = [
    (texts, width) for texts, width in itertools.product((1, 2, 4, 8, 12, 16), (4, 8, 16, 32, 64))
]


@dataclass(frozen=True)
class CallCost:
    overhead_ms: float
    ms_per_token: float
    load: float

    @property
    def overhead_tokens(self) -> float:
        return self.overhead_ms / self.ms_per_token


def _encodings(embedder, texts: int, width: int) -> list:
    """Encodings of `texts` texts of exactly `width` tokens (a repeated word)."""
    encodings = embedder.encoder.tokenize([" ".join(["protein"] * (width - 2))] * texts)
    if any(len(e.ids) != width for e in encodings):  # [CLS] + words + [SEP]
        raise ValueError(f"'protein' is not one token for {embedder.model_id}")
    return encodings


def measure(settings: Settings, runtime: str = "onnx", repeats: int = 15) -> CallCost:
    """Fastest ms per call (feeds + run + normalize) per shape; fit ms = a + b * padded tokens.

    The fastest of the repeats, not the median: on a shared machine the other processes only
    ever add time, so the minimum is the closest to the call's own cost.
    """
    embedder = load_embedder(settings.model_id, runtime=runtime, onnx_dir=settings.onnx_dir)
    load = os.getloadavg()[0]
    samples: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
    encoded = {shape: _encodings(embedder, *shape) for shape in SHAPES}
    for _ in range(repeats):  # shapes interleaved so load drift hits all of them alike
        for shape in SHAPES:
            started = time.perf_counter()
            run_session(embedder.session, embedder.encoder.feeds(encoded[shape]))
            samples[shape].append((time.perf_counter() - started) * 1000)
    tokens = np.array([t * w for t, w in SHAPES], dtype=float)
    ms = np.array([min(samples[s]) for s in SHAPES])
    slope, intercept = np.polyfit(tokens, ms, 1)
    return CallCost(float(intercept), float(slope), (load + os.getloadavg()[0]) / 2)


def run(args, out) -> None:
    cost = measure(Settings.from_env(), args.runtime, args.repeats)
    print(  # a benchmark's report; it writes no section
        f"{args.runtime}: {cost.overhead_ms:.2f} ms per call + {cost.ms_per_token * 1000:.1f} us"
        f" per padded token = {cost.overhead_tokens:.0f} token equivalents per call"
        f" (1-min load {cost.load:.1f} on {os.cpu_count()} CPUs)"
    )
