"""The shadow topic's benchmark: served latency with shadow reads on and off under load."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmarks.common import options
from benchmarks.registry import Benchmark
from candlefire_pipeline.settings.shadow import WORKER_PRIORITIES

SERVED = ("pgvector", "chroma")
#: the issue's figure first; normal priority shows why the worker yields; 1 client leaves a core
#: idle for coverage; Chroma serving puts the cheap pgvector read in the shadow
DEFAULT_SCENARIOS = "8:idle:pgvector,8:normal:pgvector,1:idle:pgvector,8:idle:chroma"


@dataclass(frozen=True)
class Scenario:
    clients: int
    priority: str = "idle"
    served: str = "pgvector"

    @property
    def shadow(self) -> str:
        return "chroma" if self.served == "pgvector" else "pgvector"

    def __str__(self) -> str:
        return f"{self.clients}:{self.priority}:{self.served}"


def scenarios(text: str) -> list[Scenario]:
    """ "8:idle:pgvector,1" -> [Scenario(8, "idle", "pgvector"), Scenario(1)]."""
    out = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        clients, *rest = item.split(":")
        if len(rest) > 2 or (rest and rest[0] not in WORKER_PRIORITIES):
            raise argparse.ArgumentTypeError(
                f"{item!r}: clients[:priority[:served]], priority one of"
                f" {', '.join(WORKER_PRIORITIES)}"
            )
        if len(rest) == 2 and rest[1] not in SERVED:
            raise argparse.ArgumentTypeError(f"{item!r}: served store one of {', '.join(SERVED)}")
        out.append(Scenario(options.positive_int(clients), *rest))
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r} names no scenario")
    return out


def shadow_options(parser) -> None:
    options.option(parser, "--scenarios", scenarios, scenarios(DEFAULT_SCENARIOS),
                   quick=scenarios("2:idle:pgvector"),
                   help="clients:worker priority:served store, comma-separated")  # fmt: skip
    options.seconds(parser, 60.0, quick=6.0, help="seconds with shadowing off, and on")
    options.size(parser, 62_196, quick=3_000)
    options.requests(parser, 60, quick=10, help="requests the clients take in turn")


BENCHMARKS = (
    Benchmark(
        name="shadow",
        summary="served p95 and throughput with shadow reads on vs off under 8 clients, replays"
        " dropped, coverage",
        sections=("shadow",),
        run="benchmarks.shadow.under_load:run",
        add_options=shadow_options,
    ),
)
