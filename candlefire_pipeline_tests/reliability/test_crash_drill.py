"""Fault: SIGKILL of the Postgres server or the run worker at random points of a drop (the
COPY, the term-cache upkeep, the phrase-index build, the HNSW first build), of the switch's
writes, of unretire's Chroma rebuild and of an adoption import; after each, what the schedule
(or the operator) runs next converges: nothing lost or twice against the ledger (and the app's
collection), the term cache exact, indexes valid (amcheck), used and agreeing with a scan, the
switch agreeing with its history (reliability/drill/)."""

from __future__ import annotations

import os
import random

import pytest

from candlefire_pipeline_tests.backends.pg.terms.corpus import Corpus
from candlefire_pipeline_tests.reliability.drill.harness import Drill, summary
from candlefire_pipeline_tests.reliability.drill.stages import SERVER, WORKER

pytestmark = pytest.mark.server

#: Printed with the result; CANDLEFIRE_DRILL_SEED replays another drill.
SEED = int(os.environ.get("CANDLEFIRE_DRILL_SEED", "4417"))
BULK_ROWS = 500
PER_STAGE = {"copy": 2, "upkeep": 2, "phrase": 2, "hnsw": 2, "switch": 2, "unretire": 1, "adopt": 2}


def _rows():
    """About 700 chunks of the term-cache tests' ALS-like corpus (a first load of BULK_ROWS
    or more builds every index)."""
    corpus = Corpus(random.Random(SEED))
    return corpus.rows(corpus.add(400))


def test_every_random_kill_point_converges(own_pg, tmp_path):
    drill = Drill(own_pg, tmp_path, _rows(), SEED, bulk_rows=BULK_ROWS)
    drill.load()
    points = drill.run(PER_STAGE)
    print(summary(points), *(p.line() for p in points), sep="\n")
    assert [p.line() for p in points if not p.survived] == []
    assert len(points) == sum(PER_STAGE.values())
    kinds = {(p.stage, p.target) for p in points}
    assert {(s, t) for s in PER_STAGE for t in (SERVER, WORKER) if s != "unretire"} <= kinds
    # the checks looked at something: a kept cache and an index searched after drop kills, the
    # whole collection compared after an import's
    assert all(p.figures["rows"] == len(drill.app_rows) > 0 for p in points if p.stage == "adopt")
    drops = [p for p in points if p.stage in ("copy", "upkeep", "phrase")]
    assert all(p.figures["audited"] > 0 for p in drops)
    assert all(p.place for p in points)
