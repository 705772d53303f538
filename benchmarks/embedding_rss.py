"""Peak RSS of papers -> chunks -> embeddings for a 60k+ chunk drop, measured by the process.

Each measurement runs in a fresh subprocess that reads its own peak RSS (getrusage) at the
end and its current RSS (/proc/self/status) at every progress line, so growth with the
corpus shows up as a rising timeline, not just a high peak.
"""

from __future__ import annotations

import json
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.retrieval_data import DOC_CHARS, shared_data
from candlefire_pipeline.settings import REPO_ROOT

#: the issue #14 workload: candle-fire's corpus at its 20k-paper cap
BUILD_CHUNKS = 62_196
SECTIONS = ("Introduction", "Methods", "Results", "Discussion", "Conclusion")
GOAL_MB = 1000


def _source_texts() -> tuple[list[str], str]:
    """Real titles, and one long stream of real abstract text (SciFact + PubMedQA)."""
    records = []
    for name in ("scifact/corpus.jsonl", "pubmedqa/papers.jsonl"):
        with (shared_data() / name).open() as fh:
            records += [json.loads(line) for line in fh]
    titles = [r["title"] for r in records if r.get("title")]
    stream = " ".join(r["abstract"] for r in records if r.get("abstract"))
    return titles, stream


def _window(rng: random.Random, stream: str, size: int) -> str:
    start = rng.randrange(len(stream) - size)
    return stream[start : start + size].strip()


def build_drop(path: Path, chunks: int = BUILD_CHUNKS, seed: int = 14) -> dict:
    """A papers.jsonl drop whose papers chunk into exactly `chunks` ~1,000-character chunks.

    Papers have an abstract and up to five full-text sections, each a window of real abstract
    text at a random offset (new pmids, so every chunk is new to the embedding cache).
    """
    rng = random.Random(seed)
    titles, stream = _source_texts()
    per_paper = 1 + len(SECTIONS)
    papers = math.ceil(chunks / per_paper)
    written = 0
    with path.open("w") as fh:
        for number in range(papers):
            title = rng.choice(titles)
            n_chunks = min(per_paper, chunks - written)
            body = DOC_CHARS - len(title) - 16  # the chunk document adds "\n[Section]\n"
            sections = [f"[{n}]\n{_window(rng, stream, body)}" for n in SECTIONS[: n_chunks - 1]]
            record = {
                "pmid": str(70_000_000 + number),
                "title": title,
                "abstract": _window(rng, stream, body),
                "year": rng.randint(1990, 2025),
                "full_text": "\n".join(sections) if sections else None,
            }
            fh.write(json.dumps(record) + "\n")
            written += n_chunks
    return {"papers": papers, "chunks": written, "mb": path.stat().st_size / 2**20}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, runtime: str, drop: Path, out_dir: Path) -> None:
    """Subprocess body: one JSON line with its own peak RSS and what it did."""
    from candlefire_pipeline.corpus.drops import write_chunks, write_papers
    from candlefire_pipeline.embedding import load_embedder
    from candlefire_pipeline.settings import Settings

    settings = Settings.from_env()
    embedder = load_embedder(settings.model_id, settings.embed_batch_size, runtime,
                             settings.onnx_dir)  # fmt: skip
    report: dict = {"mode": mode, "runtime": runtime, "model_id": embedder.model_id}
    if mode == "model":
        from benchmarks.runtime_speed import bulk_texts

        embedder.embed(bulk_texts(2 * settings.embed_batch_size))  # two full batches
    else:
        timeline: list[tuple[int, float]] = []

        def progress(message: str) -> None:
            done = int(message.split(": ")[1].split("/")[0].replace(",", ""))
            timeline.append((done, round(_rss_mb())))
            sys.stderr.write(f"{message}; RSS {timeline[-1][1]} MB\n")

        started = time.perf_counter()
        report["papers"] = write_papers(drop, out_dir).accepted
        report["chunks"] = write_chunks(out_dir).chunks
        report["rss_before_embedding_mb"] = round(_rss_mb())
        summary = write_embeddings_with(embedder, out_dir, progress)
        report["embedded"] = summary.embedded
        report["embed_rate"] = summary.chunks_per_second
        report["seconds"] = time.perf_counter() - started
        report["timeline"] = timeline
    report["peak_rss_mb"] = _peak_mb()
    print(json.dumps(report))


def write_embeddings_with(embedder, out_dir: Path, progress):
    from candlefire_pipeline.embedding import EmbeddingCache, write_embeddings

    return write_embeddings(
        out_dir / "chunks.parquet",
        out_dir / "embeddings.parquet",
        embedder,
        EmbeddingCache(out_dir / "cache.sqlite"),
        progress=progress,
        progress_interval=30.0,
    )


def run_child(mode: str, runtime: str, drop: Path, out_dir: Path) -> dict:
    command = [sys.executable, "-m", "benchmarks.bench_embedding", "--rss-child", mode, runtime]
    command += [str(drop), str(out_dir)]
    done = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
