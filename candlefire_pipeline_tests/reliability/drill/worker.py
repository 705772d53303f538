"""The drill's run worker: one stage of a drop in its own process, as a Dagster step runs it.

`python -m candlefire_pipeline_tests.reliability.drill.worker STAGE CONFIG_JSON` prints `go`
just before the stage's first write (the harness times its random kill from there) and `done`
when it finished. The same functions are what the harness runs after a kill: what the
schedule would run next.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.operations.retirement.rebuild import rebuild
from candlefire_pipeline.operations.serving.machine import transition
from candlefire_pipeline.operations.serving.table import ROLLBACK
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import REFERENCE
from candlefire_pipeline_tests.reliability.drill.adopt import adopt_step

#: Switch changes one switch-stage run makes (each writes the file, queues and inserts history).
SWITCH_CHANGES = 40


def open_pg(config: dict):
    """The drill's pgvector store (a first load of bulk_rows or more builds every index)."""
    return build_backend(
        "pgvector", config["dsn"], table=config["table"], bulk_rebuild_rows=config["bulk_rows"]
    )


def drop_step(config: dict, announce=lambda: None) -> None:
    """The store asset's step for one drop: apply the batch (COPY, term-cache upkeep, HNSW and
    GIN inserts; a first load builds the indexes), then build the phrase index where missing."""
    store = open_pg(config)
    try:
        announce()
        apply_batch(store, Path(config["batches"]), config["key"], config["model"], config["dim"])
        store.build_phrase_index()
    finally:
        store.close()


def switch_step(config: dict, announce=lambda: None) -> None:
    """Operator rollbacks, one after another: each a switch write and a history insert."""
    settings = Settings.from_env(parity=False).with_data_dir(Path(config["data_dir"]))
    announce()
    for number in range(config.get("changes", SWITCH_CHANGES)):
        reason = f"drill point {config['point']} change {number}"
        transition(settings, ROLLBACK, reason, "drill", dsn=config["dsn"])


def unretire_step(config: dict, announce=lambda: None) -> None:
    """unretire's rebuild of Chroma from the ledger (what it lacks, written again)."""
    chroma = build_backend(REFERENCE, Path(config["chroma"]))
    try:
        announce()
        rebuild(chroma, StoreLedger(Path(config["batches"]), REFERENCE))
    finally:
        chroma.close()


STEPS = {"drop": drop_step, "switch": switch_step, "unretire": unretire_step, "adopt": adopt_step}


def main(argv: list[str]) -> int:
    stage, config = argv[0], json.loads(argv[1])
    STEPS[stage](config, announce=lambda: print("go", flush=True))
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
