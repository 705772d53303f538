"""Every benchmark `python -m benchmarks` runs. Each topic package's `benchmark` module declares
its own: the name, one line on what it measures, the docs/BENCHMARKS.md sections it writes, its
options and the function that runs it; this module collects them."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

#: The topic packages, in the order `--list` shows them.
TOPICS = (
    "load", "embedding", "throughput", "retrieval", "scale", "filters", "churn", "cold_start",
    "shadow", "generations", "app", "retirement", "adopt", "replica", "backup", "drill",
)  # fmt: skip


def no_options(parser: argparse.ArgumentParser) -> None:
    """A benchmark with only the options every benchmark takes."""


@dataclass(frozen=True)
class Benchmark:
    name: str
    summary: str
    #: docs/BENCHMARKS.md sections it writes (empty: it prints only)
    sections: tuple[str, ...]
    #: "module:function" taking (args, out); imported only when the benchmark runs, so that
    #: listing the benchmarks loads no model or store library
    run: str
    add_options: Callable[[argparse.ArgumentParser], None] = no_options

    def runner(self) -> Callable:
        module, function = self.run.split(":")
        return getattr(importlib.import_module(module), function)

    def line(self) -> str:
        """One line of `--list`: name, what it measures, the sections it writes."""
        writes = f"writes {', '.join(self.sections)}" if self.sections else "writes no section"
        return f"{self.name:<15} {self.summary} [{writes}]"


def benchmarks() -> dict[str, Benchmark]:
    """name -> Benchmark over every topic; a name declared twice is an error."""
    found: dict[str, Benchmark] = {}
    for topic in TOPICS:
        for benchmark in importlib.import_module(f"benchmarks.{topic}.benchmark").BENCHMARKS:
            if benchmark.name in found:
                raise ValueError(f"benchmark {benchmark.name!r} is declared twice")
            found[benchmark.name] = benchmark
    return found
