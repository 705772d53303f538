"""Embedding runtimes side by side: torch vs ONNX fp32 vs ONNX int8, speed and agreement."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from benchmarks.common.machine_load import LoadMonitor
from benchmarks.embedding import agreement as runtime_agreement
from benchmarks.embedding import speed as runtime_speed
from candlefire_pipeline.settings import (
    DEFAULT_BULK_RUNTIME,
    DEFAULT_QUERY_RUNTIME,
    EMBED_RUNTIMES,
    Settings,
)

RUNTIMES = ("torch", "onnx", "onnx-int8")
#: fp32 ONNX may share torch's identity only within these (issue #14).
MIN_MEAN_COSINE = 0.9999
MAX_NDCG_DELTA = 0.002
QUERY_SPEED_UP_GOAL = 2.0


def _fp32_winner(speeds: dict[str, float]) -> str:
    """The faster of the runtimes that make the store's vectors (int8 is opt-in only)."""
    return max((r for r in speeds if EMBED_RUNTIMES[r] == "fp32"), key=speeds.get)


@dataclass
class SpeedRun:
    """What one speed measurement saw: per-runtime query timings, bulk timings per batch size."""

    models: dict
    query: dict
    chunks: list[str]
    bulk: dict
    load: LoadMonitor


def measure_speed(settings: Settings, repeats: int, texts: int, sizes: list[int]) -> SpeedRun:
    models = runtime_speed.query_models(settings, RUNTIMES)
    with LoadMonitor() as load:
        query = runtime_speed.query_path(models, repeats)
        chunks = runtime_speed.bulk_texts(texts)
        bulk = runtime_speed.bulk(settings, RUNTIMES, sizes, chunks, max(3, repeats // 10))
    return SpeedRun(models, query, chunks, bulk, load)


def speed_section(settings: Settings, repeats: int, texts: int, sizes: list[int]) -> str:
    run = measure_speed(settings, repeats, texts, sizes)
    bulk_lines, best_bulk = _bulk_lines(run, sizes)
    return "\n".join(
        [
            f"Model `{settings.model_id}` on CPU; {os.cpu_count()} CPUs. All runtimes run"
            " interleaved in one process (order rotated every round), medians over repeats.",
            "",
            *_query_lines(run, repeats),
            *bulk_lines,
            *_verdict_lines(run, best_bulk),
            "",
            run.load.note(),
        ]
    )


def _query_lines(run: SpeedRun, repeats: int) -> list[str]:
    torch_p50 = runtime_speed.median_ms(run.query["torch"])
    onnx_speed_up = torch_p50 / runtime_speed.median_ms(run.query["onnx"])
    verdict = "met" if onnx_speed_up >= QUERY_SPEED_UP_GOAL else "MISSED"
    lines = [
        f"**Query path**: one request = 1 SciFact claim + {runtime_speed.ENTITY_NAMES} entity"
        f" names in one `embed` call, one request at a time, {repeats} requests per runtime."
        " torch is stock `SentenceTransformer.encode` (one batch padded to its longest text);"
        " the ONNX runtimes sort the texts by token count and split them where a call costs"
        f" less than its padding (`{runtime_speed.ONE_CALL}` = fp32 ONNX without that split):",
        "",
        "| runtime | p50 ms | p95 ms | CPU ms (median) | speed-up vs torch (p50) |",
        "|---|---|---|---|---|",
    ]
    for runtime, timing in run.query.items():
        p50 = runtime_speed.median_ms(timing)
        lines.append(
            f"| {runtime} | {p50:.1f} | {timing.p(0.95) * 1000:.1f} |"
            f" {statistics.median(timing.cpu) * 1000:.1f} | {torch_p50 / p50:.2f}x |"
        )
    return [
        *lines,
        "",
        f"Query-path goal (issue #14): fp32 ONNX >= {QUERY_SPEED_UP_GOAL:.0f}x torch at p50:"
        f" **{onnx_speed_up:.2f}x, {verdict}**.",
        "",
        *token_lines(run.models, runtime_speed.query_requests(repeats)),
    ]


def _bulk_lines(run: SpeedRun, sizes: list[int]) -> tuple[list[str], dict[str, float]]:
    """The bulk table, and each runtime's best chunks/s over the batch sizes."""
    lines = [
        "",
        f"**Bulk**: {len(run.chunks)} chunks of 1,000 characters (SciFact text), chunks/s by"
        " batch size (wall-clock median; CPU-time throughput in brackets):",
        "",
        "| runtime | " + " | ".join(f"batch {s}" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    best_bulk: dict[str, float] = {}
    for runtime in RUNTIMES:
        cells = []
        for size in sizes:
            timing = run.bulk[(runtime, size)]
            rate = len(run.chunks) / statistics.median(timing.wall)
            cpu_rate = len(run.chunks) / statistics.median(timing.cpu)
            best_bulk[runtime] = max(best_bulk.get(runtime, 0.0), rate)
            cells.append(f"{rate:.1f} ({cpu_rate:.1f})")
        lines.append(f"| {runtime} | " + " | ".join(cells) + " |")
    return lines, best_bulk


def _verdict_lines(run: SpeedRun, best_bulk: dict[str, float]) -> list[str]:
    query_speed = {r: 1 / runtime_speed.median_ms(run.query[r]) for r in RUNTIMES}
    faster_query, faster_bulk = _fp32_winner(query_speed), _fp32_winner(best_bulk)
    agree = (faster_query, faster_bulk) == (DEFAULT_QUERY_RUNTIME, DEFAULT_BULK_RUNTIME)
    return [
        "",
        f"Faster fp32 runtime: query path **{faster_query}**, bulk **{faster_bulk}**; defaults"
        f" in settings/embedding.py: query `{DEFAULT_QUERY_RUNTIME}`, bulk `{DEFAULT_BULK_RUNTIME}`"
        + ("." if agree else " -- **the defaults disagree with this run**."),
        "int8 is never a default: its vectors differ, so it is its own identity"
        " (`<model>@onnx-int8`) and needs a store built with it.",
    ]


def token_lines(models: dict, requests: list[list[str]]) -> list[str]:
    """Why the grouping pays: padded vs real tokens per request, per way of calling the model."""
    grouped = runtime_speed.token_profile(models["onnx"], requests)
    one_call = runtime_speed.token_profile(models[runtime_speed.ONE_CALL], requests)
    rows = [
        ("torch (one batch) and " + runtime_speed.ONE_CALL, one_call),
        ("onnx and onnx-int8 (length groups)", grouped),
    ]
    lines = [
        "Tokens per query-path request (mean over the same requests; the tokenizer is the"
        " same for every runtime):",
        "",
        "| calls made by | model calls | padded tokens | real tokens | padding share |",
        "|---|---|---|---|---|",
    ]
    for label, p in rows:
        lines.append(
            f"| {label} | {p.calls:.2f} | {p.padded:.1f} | {p.real:.1f} |"
            f" {1 - p.real / p.padded:.0%} |"
        )
    return lines


def agreement_section(settings: Settings, docs: int | None = None) -> str:
    models = runtime_speed.embedders(settings, RUNTIMES, batch_size=settings.embed_batch_size)
    with LoadMonitor() as load:
        results = runtime_agreement.agreement(models, docs)
    reference = results[0]
    lines = [
        f"Every runtime on {reference.docs:,} SciFact documents (chunker format) and"
        f" {reference.claims} training claims; cosine against the torch vector of the same"
        " document; nDCG@10 of exact search over each runtime's own vectors (binary relevance"
        " judgments).",
        "",
        "| runtime | mean cosine | min cosine | nDCG@10 | delta vs torch | corpus embed s |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.runtime} | {r.mean_cosine:.6f} | {r.min_cosine:.6f} | {r.ndcg10:.4f} |"
            f" {r.ndcg10 - reference.ndcg10:+.4f} | {r.seconds:.0f} |"
        )
    onnx = next(r for r in results if r.runtime == "onnx")
    ok = onnx.mean_cosine >= MIN_MEAN_COSINE and abs(onnx.ndcg10 - reference.ndcg10) <= (
        MAX_NDCG_DELTA
    )
    lines += [
        "",
        f"fp32 ONNX vs torch: mean cosine >= {MIN_MEAN_COSINE} and |delta nDCG@10| <="
        f" {MAX_NDCG_DELTA}: **{'met' if ok else 'NOT met'}** -- which is why fp32 ONNX shares"
        " the model's identity (stores and cache entries) with torch.",
        "",
        load.note(),
    ]
    return "\n".join(lines)


def run(args, out) -> None:
    settings = Settings.from_env()
    if "speed" in args.parts:
        section = speed_section(settings, args.requests, args.texts, args.batch_sizes)
        out.section("embedding-runtime", section)
    if "agreement" in args.parts:
        out.section("embedding-agreement", agreement_section(settings, args.docs))
