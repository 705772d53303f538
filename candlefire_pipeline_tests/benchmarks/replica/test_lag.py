"""The replica benchmark, short (`python -m benchmarks replica --quick`'s sizes): a real primary
and hot standby, two 20% drops, the second with the replay paused; the app's collection on the
replica answers from the previous state while it lags, never torn, never an error."""

from __future__ import annotations

from argparse import Namespace

import pytest

from benchmarks.common.stores import scratch_dir
from benchmarks.replica.lag import PREFIX, measure
from benchmarks.replica.probe import ERROR, NEW, PREVIOUS, TORN
from benchmarks.replica.report import figures, section
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.memo import MemoEmbedder

pytestmark = pytest.mark.server  # starts a primary and its replica

QUICK = Namespace(size=1_500, share=0.2, hold=2.0, sample=5)


@pytest.fixture
def result(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1")
    with scratch_dir(PREFIX) as root:
        yield measure(MemoEmbedder(load_embedder("hashing-v1")), root, QUICK)


def test_a_lagging_replica_answers_from_the_previous_state_then_the_new_one(result):
    streaming, paused = (figures(phase) for phase in result["phases"])
    assert result["backup"]["bytes"] > 0 and result["rows"] == QUICK.size
    for drop in (streaming, paused):
        assert drop["answers"][TORN] == 0 and drop["answers"][ERROR] == 0, drop["errors"]
        assert drop["answers"][PREVIOUS] > 0 and drop["answers"][NEW] > 0  # before, and after
        assert drop["rows"] > 0 and drop["replayed_after_commit_s"] >= 0
    # paused: the commit waits on the primary until the replay resumes
    assert paused["lagging_answers"][PREVIOUS] > 0 and paused["lag_bytes_max"] > 0
    markdown = section(result, QUICK, "quiet", 1.0)
    assert "| paused replay |" in markdown and "Lag over time" in markdown
