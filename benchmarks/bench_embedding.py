"""Embedding stage vs raw SentenceTransformer.encode, and peak RSS of a whole-corpus drop.

Run: .venv/bin/python -m benchmarks.bench_embedding [--repeats N] [--texts N]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA
from candlefire_pipeline.embedding import EmbeddingCache, load_embedder, write_embeddings
from candlefire_pipeline.settings import DEFAULT_MODEL_ID, REPO_ROOT

GOAL_RATIO = 0.95


def shared_data() -> Path:
    return Path(os.environ.get("CANDLEFIRE_SHARED_DATA", REPO_ROOT.parent / "shared/data"))


def scifact_papers(limit: int | None) -> list[dict]:
    with (shared_data() / "scifact" / "corpus.jsonl").open() as fh:
        return [json.loads(line) for line in itertools.islice(fh, limit)]


def abstract_chunks(papers: list[dict]) -> pa.Table:
    """Abstract-only chunks in the chunker's document format (SciFact has no full text)."""
    docs = [f"{p['title']}\n{' '.join(p.get('mesh_terms') or [])}\n{p['abstract']}" for p in papers]
    n = len(papers)
    pmids = [str(p["pmid"]) for p in papers]
    columns = {
        "chunk_id": pmids,
        "pmid": pmids,
        "section": ["abstract"] * n,
        "chunk_index": [0] * n,
        "title": [p["title"] for p in papers],
        "year": [p.get("year") for p in papers],
        "doi": [p.get("doi") or "" for p in papers],
        "citation_count": [p.get("citation_count") or 0 for p in papers],
        "entity_names": [""] * n,
        "mesh_terms": [""] * n,
        "has_full_text": [False] * n,
        "document": docs,
        "content_hash": [hashlib.sha256(doc.encode()).hexdigest() for doc in docs],
        "paper_hash": [""] * n,
    }
    return pa.Table.from_pydict(columns, schema=CHUNK_SCHEMA)


def time_stage(embedder, chunks_path: Path, work: Path, run: int) -> float:
    cache = EmbeddingCache(work / f"cache-{run}.sqlite")  # empty: every chunk is embedded
    summary = write_embeddings(chunks_path, work / f"embeddings-{run}.parquet", embedder, cache)
    assert summary.embedded == summary.chunks
    return summary.seconds


def time_raw(embedder, texts: list[str]) -> float:
    started = time.perf_counter()
    embedder.model.encode(texts, batch_size=embedder.batch_size, show_progress_bar=False)
    return time.perf_counter() - started


def throughput_section(n_texts: int, repeats: int) -> tuple[str, float]:
    embedder = load_embedder(DEFAULT_MODEL_ID)
    table = abstract_chunks(scifact_papers(n_texts))
    texts = table["document"].to_pylist()
    embedder.embed(texts[:64])  # warm-up: first call pays one-off allocation costs
    stage_s, raw_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        chunks_path = work / "chunks.parquet"
        pq.write_table(table, chunks_path)
        for run in range(repeats):
            # alternate the order so drift (thermal, page cache) hits both sides equally
            if run % 2 == 0:
                stage_s.append(time_stage(embedder, chunks_path, work, run))
                raw_s.append(time_raw(embedder, texts))
            else:
                raw_s.append(time_raw(embedder, texts))
                stage_s.append(time_stage(embedder, chunks_path, work, run))
            print(f"run {run}: stage {stage_s[-1]:.2f}s, raw encode {raw_s[-1]:.2f}s")
    stage_rate = len(texts) / statistics.median(stage_s)
    raw_rate = len(texts) / statistics.median(raw_s)
    ratio = stage_rate / raw_rate
    markdown = (
        f"Embedding stage (`write_embeddings`, empty cache) vs raw `SentenceTransformer.encode`"
        f" on the same {len(texts)} SciFact abstracts, all-MiniLM-L6-v2 on CPU, batch size"
        f" {embedder.batch_size}, median of {repeats} alternating runs:\n\n"
        "| path | chunks/s |\n|---|---|\n"
        f"| raw `encode` | {raw_rate:.1f} |\n"
        f"| `write_embeddings` (parquet in/out + SQLite cache) | {stage_rate:.1f} |\n\n"
        f"Throughput ratio stage / raw: **{ratio:.3f}** (goal >= {GOAL_RATIO})."
    )
    return markdown, ratio


def rss_child(mode: str, drop: Path, out_dir: Path) -> None:
    """Child process body: print its own peak RSS (and stage counts) as one JSON line."""
    from candlefire_pipeline.corpus.drops import write_chunks, write_papers

    embedder = load_embedder(DEFAULT_MODEL_ID)
    report: dict = {"mode": mode}
    if mode == "model":
        embedder.embed(["warm-up text"] * 64)
    else:
        started = time.perf_counter()
        report["papers"] = write_papers(drop, out_dir).accepted
        report["chunks"] = write_chunks(out_dir).chunks
        summary = write_embeddings(
            out_dir / "chunks.parquet",
            out_dir / "embeddings.parquet",
            embedder,
            EmbeddingCache(out_dir / "cache.sqlite"),
        )
        report["embedded"] = summary.embedded
        report["embed_rate"] = summary.chunks_per_second
        report["seconds"] = time.perf_counter() - started
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report))


def run_rss_child(mode: str, drop: Path, out_dir: Path) -> dict:
    command = [sys.executable, "-m", "benchmarks.bench_embedding", "--rss-child", mode]
    command += [str(drop), str(out_dir)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def rss_section() -> str:
    drop = shared_data() / "scifact" / "corpus.jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        baseline = run_rss_child("model", drop, Path(tmp))
        full = run_rss_child("drop", drop, Path(tmp) / "batch")
    print(f"model only: {baseline}\nwhole drop: {full}")
    drop_mb = drop.stat().st_size / 2**20
    return (
        f"Peak RSS of one process materializing papers -> chunks -> embeddings for the whole"
        f" SciFact corpus as one drop ({full['papers']} papers, {drop_mb:.1f} MB of JSONL,"
        f" {full['chunks']} chunks, empty cache):\n\n"
        "| process | peak RSS (MB) |\n|---|---|\n"
        f"| load model + embed 64 texts (baseline) | {baseline['peak_rss_mb']:.0f} |\n"
        f"| whole drop, all three stages | {full['peak_rss_mb']:.0f} |\n\n"
        f"Data-dependent overhead: {full['peak_rss_mb'] - baseline['peak_rss_mb']:.0f} MB;"
        f" the three stages took {full['seconds']:.0f} s"
        f" (embedding {full['embed_rate']:.0f} chunks/s)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--skip-rss", action="store_true", help="only the throughput comparison")
    parser.add_argument("--rss-only", action="store_true", help="only the whole-corpus peak RSS")
    parser.add_argument("--rss-child", nargs=3, metavar=("MODE", "DROP", "OUT_DIR"))
    args = parser.parse_args()
    if args.rss_child:
        mode, drop, out_dir = args.rss_child
        rss_child(mode, Path(drop), Path(out_dir))
        return
    from benchmarks._report import write_section

    if not args.rss_only:
        throughput, ratio = throughput_section(args.texts, args.repeats)
        print(throughput)
        write_section("embedding", throughput)
        if ratio < GOAL_RATIO:
            print(f"WARNING: throughput ratio {ratio:.3f} is below the goal {GOAL_RATIO}")
    if not args.skip_rss:
        memory = rss_section()
        print(memory)
        write_section("embedding-rss", memory)


if __name__ == "__main__":
    main()
