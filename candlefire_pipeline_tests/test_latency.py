"""The tests' latency switch: this process lets any measured p95 ratio pass, a subprocess reads
the environment's widest valid ratio, and the range is back after the test."""

from __future__ import annotations

import os

import pytest

from candlefire_pipeline.settings import ParityThresholds, Settings, sections
from candlefire_pipeline_tests.latency import UNGATED_P95_RATIO, ignore_machine_latency


def test_the_process_reads_an_ungated_ratio_and_a_subprocess_a_valid_one(monkeypatch):
    variable, _, high = sections.THRESHOLD_RANGES["p95_ratio"]
    ignore_machine_latency(monkeypatch)
    assert Settings.from_env().parity.p95_ratio == UNGATED_P95_RATIO
    assert os.environ[variable] == str(high)  # what a child process validates and reads
    monkeypatch.undo()
    assert ParityThresholds.from_env().p95_ratio <= high
    with pytest.raises(ValueError, match=variable):
        ParityThresholds(p95_ratio=UNGATED_P95_RATIO)
