"""One measured operation in a fresh process (its peak RSS is its own), settings from the
environment as an operator's command reads them. Prints one JSON line.

  unretire: operations.retirement.commands.unretire of Chroma, end to end, with its parts
    timed (rebuild.rebuild: the rebuild pass, then the catch-up pass under the write lock;
    rebuild.differing: the check against the ledger);
  first-load KEY...: apply_batch of each batch, in order, to Chroma (the dual-write's path).

Run by the unretire benchmark (retirement/rebuild_cost.py), e.g.:
  python -m benchmarks.retirement.child first-load drop-0001 drop-0002 --model M --dim 384
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from benchmarks.retirement.parts import PartTimer
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.operations.retirement import commands
from candlefire_pipeline.operations.serving.commands import Order
from candlefire_pipeline.operations.serving.machine import CHANGED
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import REFERENCE


def peak_rss() -> int:
    """This process's peak resident set, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def unretire(settings: Settings) -> dict:
    timer = PartTimer()
    said: list[str] = []
    with timer.timing(commands, ("rebuild", "differing")):
        started = time.perf_counter()
        order = Order("unretire", "bench: the way back", "bench")
        outcome = commands.unretire(settings, REFERENCE, order, say=said.append)
        seconds = time.perf_counter() - started
    reports = timer.results.get("rebuild", [])
    return {
        "seconds": seconds,
        "parts": timer.seconds,
        "rows_written": sum(r.rows_written for r in reports if r is not None),
        "papers_written": sum(r.papers_rewritten for r in reports if r is not None),
        "changed": outcome.decision.outcome == CHANGED,
        "still_retired": REFERENCE in outcome.state.retired,
        "message": outcome.decision.message,
        "said": said,
    }


def first_load(settings: Settings, keys: list[str], model_id: str, dim: int) -> dict:
    seconds, rows = 0.0, 0
    with opened_backend(REFERENCE, settings) as chroma:
        for key in keys:
            started = time.perf_counter()
            summary = apply_batch(chroma, settings.batches_dir, key, model_id, dim)
            seconds += time.perf_counter() - started
            rows += summary.rows_written
    return {"seconds": seconds, "rows_written": rows, "batches": len(keys)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("operation", choices=("unretire", "first-load"))
    parser.add_argument("keys", nargs="*", help="batch keys (first-load)")
    parser.add_argument("--model", help="the batches' model id (first-load)")
    parser.add_argument("--dim", type=int, help="the batches' vector dimension (first-load)")
    args = parser.parse_args()
    settings = Settings.from_env()
    if args.operation == "unretire":
        result = unretire(settings)
    else:
        result = first_load(settings, args.keys, args.model, args.dim)
    print(json.dumps({**result, "peak_rss": peak_rss()}))


if __name__ == "__main__":
    main()
