"""The crash drill at size: the scaled corpus (hashing vectors) loaded as the first drop, then
every kill point of the schedule, each followed by the next run and every check."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common.scaled.corpus import stream_rows
from benchmarks.drill.benchmark import POINTS
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline_tests.reliability.drill.harness import Drill, KillPoint, summary

#: Longest random delays after a phase is seen, at size (seconds): the builds last longer.
MAX_DELAYS = {"hnsw": 15.0, "phrase": 5.0, "unretire": 4.0, "adopt": 12.0}


def per_stage(points: int, stages: list[str]) -> dict[str, int]:
    return {name: points or POINTS[name] for name in POINTS if name in stages}


def section_of(stages: list[str]) -> str:
    """A run of some stages writes its own section: the full run's figures stay."""
    return "drill" if set(stages) == set(POINTS) else "drill-stages"


def markdown(points: list[KillPoint], args, seconds: float, running: bool = False) -> str:
    """The section: the headline, the run's figures, then every point's place and outcome."""
    recalls = [p.figures["recall"] for p in points if "recall" in p.figures]
    state = "(still running) " if running else ""
    if section_of(args.stages) != "drill":
        state += f"Stages {', '.join(args.stages)} only: "
    lines = [
        f"{state}**{summary(points)}** at {args.size:,} chunks ({args.dim}-dim hashing vectors; "
        f"an app collection of {args.adopt_papers:,} papers; drops revising {args.share:.0%} "
        f"of the papers), seed {args.seed}, "
        f"{seconds / 60:.1f} min.",
        "",
        f"HNSW recall@10 against a sequential scan after each drop point: min "
        f"{min(recalls, default=1.0):.2f}, mean {sum(recalls) / max(len(recalls), 1):.3f}.",
        "",
        "| # | stage | killed | delay | where it landed | outcome |",
        "|---|---|---|---|---|---|",
    ]
    for p in points:
        outcome = "survived" if p.survived else "FAILED: " + "; ".join(p.failures)
        place = p.place.replace("|", "/")
        lines.append(f"| {p.number} | {p.stage} | {p.target} | {p.delay_ms} ms | `{place}` | "
                     f"{outcome} |")  # fmt: skip
    return "\n".join(lines)


def run(args, out) -> None:
    # the model id names the dimension: the benchmarks' vector cache keys by model and text only
    embedder = HashingEmbedder(dim=args.dim, model_id=f"hashing-v1-{args.dim}d")
    rows = pa.concat_tables(stream_rows(embedder, args.size, 20_000))
    root = Path(tempfile.mkdtemp(prefix="candlefire-drill-"))
    root.chmod(0o755)  # the server's Unix user reaches its data directory under it
    server = EmbeddedPostgres(root / "pg")
    started = time.perf_counter()
    drills: list[Drill] = []

    def emit(line: str) -> None:
        """Each point's line printed, and the section so far written (a long run)."""
        print(line, flush=True)
        if drills and drills[0].points:
            seconds = time.perf_counter() - started
            section = markdown(drills[0].points, args, seconds, running=True)
            out.write(section_of(args.stages), section)

    try:
        drill = Drill(server, root / "drill", rows, args.seed, share=args.share, emit=emit,
                      max_delays=MAX_DELAYS if not args.quick else None,
                      adopt_papers=args.adopt_papers)  # fmt: skip
        drills.append(drill)
        drill.load()
        points = drill.run(per_stage(args.points, args.stages))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    out.section(section_of(args.stages), markdown(points, args, time.perf_counter() - started))
    if not all(p.survived for p in points):
        raise SystemExit(f"crash drill: {summary(points)}")
