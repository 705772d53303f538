"""The drill's stages: which worker step each runs, the phase its kill aims at, and what the
run after the kill must leave (the checks of checks.py that apply)."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline_tests.reliability.drill.kill import Phase

SERVER, WORKER = "server", "worker"


@dataclass(frozen=True)
class Stage:
    name: str
    #: the worker step (worker.STEPS)
    step: str
    phase: Phase
    #: what may be killed there (a Chroma rebuild runs in the worker only)
    targets: tuple[str, ...] = (SERVER, WORKER)
    #: longest random delay after the phase is seen, in seconds
    max_delay_s: float = 0.3


def stages(table: str, first_build_table: str) -> dict[str, Stage]:
    """Every stage, keyed by name; LIKE patterns name the drill's own tables."""
    return {
        "copy": Stage("copy", "drop", Phase("COPY into the table", "COPY %")),
        "upkeep": Stage("upkeep", "drop", Phase("term-cache upkeep", f"%{table}_terms%")),
        "phrase": Stage("phrase", "drop",
                        Phase("phrase-index build", f"CREATE INDEX CONCURRENTLY%{table}%")),
        "hnsw": Stage("hnsw", "drop",
                      Phase("HNSW build (first load)", f"CREATE INDEX%{first_build_table}%hnsw%",
                            after_like=f"COPY \"{first_build_table}\"%")),
        "switch": Stage("switch", "switch", Phase("switch write and history insert"),
                        max_delay_s=0.6),
        "unretire": Stage("unretire", "unretire", Phase("unretire's Chroma rebuild"),
                          targets=(WORKER,), max_delay_s=1.5),
        # timed from `go`: a kill may land in the read, a part's publish, the first build
        # (COPY, index builds) or the ledger markers written after its commit
        "adopt": Stage("adopt", "adopt", Phase("adoption import"), max_delay_s=1.5),
    }  # fmt: skip
