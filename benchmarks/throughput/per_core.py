"""Embedding throughput per CPU core (MiniLM, and a BioLORD-sized MPNet) and on a local Ray cluster.

Per core = one torch thread, the texts embedded through the project's SentenceTransformerEmbedder
longest-first (as the stage does). The 768-dim model is MPNet-base (12 layers, 768 hidden, the
architecture of all-mpnet-base-v2 and of its fine-tune BioLORD-2023-C) with RANDOM weights: its
weights cannot be downloaded here and speed does not depend on weight values. Ray: 2 actors of
1 CPU against the in-process embedder with 2 threads, alternating, same texts.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common.data import scifact_records
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.texts import abstract_chunks, pmc_section_chunks
from benchmarks.throughput.models import mpnet_base_random, token_lengths
from candlefire_pipeline.embedding import SentenceTransformerEmbedder, load_embedder
from candlefire_pipeline.settings import DEFAULT_MODEL_ID


def longest_first(texts: list[str]) -> list[str]:
    return sorted(texts, key=len, reverse=True)


def spread(texts: list[str], n: int) -> list[str]:
    """n texts evenly spaced over the length-sorted list: the same length mix, fewer texts."""
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def median_rate(embedder, texts: list[str], threads: int, repeats: int) -> float:
    """Median chunks/s of embedding `texts` with `threads` torch threads."""
    torch.set_num_threads(threads)
    embedder.embed(texts[:8])  # warm-up at this thread count
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - started))
    return statistics.median(rates)


def model_rows(name: str, embedder, corpora: dict[str, list[str]], repeats: int) -> list[str]:
    rows = []
    for corpus, texts in corpora.items():
        tokens = token_lengths(embedder, texts)
        one = median_rate(embedder, texts, 1, repeats)
        two = median_rate(embedder, texts, 2, repeats)
        print(f"{name} / {corpus}: {one:.2f} chunks/s on 1 thread, {two:.2f} on 2")
        rows.append(
            f"| {name} | {embedder.dim} | {corpus} ({len(texts)}) | {tokens:.0f} |"
            f" **{one:.2f}** | {two:.2f} | {two / one:.2f} |"
        )
    return rows


def ray_rows(texts: list[str], repeats: int) -> list[str]:
    """Ray (2 actors x 1 CPU on a local 2-CPU cluster) vs in-process with 2 threads."""
    from benchmarks.throughput.local_ray import local_ray_head
    from candlefire_pipeline.embedding.ray_executor import RayEmbedder, disconnect
    from candlefire_pipeline.settings import RaySettings

    local = load_embedder(DEFAULT_MODEL_ID)
    with tempfile.TemporaryDirectory(prefix="bench-ray-", dir="/tmp") as tmp:
        with local_ray_head(Path(tmp), num_cpus=2) as address:
            settings = RaySettings(address=address, actors=2, cpus_per_actor=1.0)
            try:
                with RayEmbedder({"model_id": DEFAULT_MODEL_ID}, settings) as remote:
                    pairs = []
                    for run in range(repeats):
                        order = [(remote, "ray"), (local, "local")][:: 1 if run % 2 else -1]
                        rates = {}
                        for embedder, name in order:
                            rates[name] = median_rate(embedder, texts, 2, 1)
                        print(f"run {run}: {rates}")
                        pairs.append(rates)
            finally:
                disconnect()
    ray = statistics.median(p["ray"] for p in pairs)
    inproc = statistics.median(p["local"] for p in pairs)
    ratio = statistics.median(p["ray"] / p["local"] for p in pairs)
    return [
        "| executor | chunks/s |\n|---|---:|",
        f"| in-process, 2 torch threads | {inproc:.2f} |",
        f"| Ray, 2 actors x 1 CPU (local head, 127.0.0.1) | {ray:.2f} |",
        f"\nRay / in-process: **{ratio:.2f}** (median of {repeats} alternating pairs).",
    ]


def per_core_lines(texts: int, mpnet_texts: int, repeats: int) -> list[str]:
    abstracts = abstract_chunks(scifact_records(texts))["document"].to_pylist()
    corpora = {
        "SciFact abstract chunks": longest_first(abstracts),
        "PMC full-text section chunks": longest_first(pmc_section_chunks(texts)),
    }
    rows = model_rows("all-MiniLM-L6-v2", load_embedder(DEFAULT_MODEL_ID), corpora, repeats)
    with tempfile.TemporaryDirectory() as tmp:
        mpnet = SentenceTransformerEmbedder(str(mpnet_base_random(Path(tmp))))
        fewer = {name: spread(texts, mpnet_texts) for name, texts in corpora.items()}
        rows += model_rows("MPNet-base, random weights", mpnet, fewer, repeats)
    return [
        "Embedding throughput through `SentenceTransformerEmbedder` (longest-first, batch 64,"
        f" CPU), median of {repeats} runs. Per core = 1 torch thread. Token length = mean tokens"
        " per chunk after the model's truncation (MiniLM 256, MPNet-base 384 word pieces). The"
        " 768-dim row is MPNet-base (12 layers, hidden 768: the architecture of"
        " all-mpnet-base-v2 and BioLORD-2023-C) with random weights, since BioLORD's cannot"
        " be downloaded here; speed does not depend on weight values.\n",
        "| model | dim | chunks | tokens | chunks/s per core | chunks/s, 2 threads |"
        " 2-thread speed-up |",
        "|---|---:|---|---:|---:|---:|---:|",
        *rows,
    ]


def run(args, out) -> None:
    load = LoadMonitor().start()
    lines = []
    if "per-core" in args.parts:
        lines += per_core_lines(args.texts, args.mpnet_texts, args.repeats)
    if "ray" in args.parts:
        abstracts = abstract_chunks(scifact_records(args.texts))["document"].to_pylist()
        ray = ray_rows(longest_first(abstracts), args.repeats)
        lines += ["\nOn a local Ray cluster (SciFact abstract chunks, MiniLM):\n", *ray]
    load.stop()
    lines.append(
        f"\n{load.note()} Under load, rates are lower bounds; ratios are the meaningful part."
    )
    out.section("throughput", "\n".join(lines))
