"""The benchmarks' shared measurement: their own docs section, load notes, and parity's metrics."""

from __future__ import annotations

import os

import pytest

from benchmarks.common import figures, machine_load, section


def test_write_section_replaces_only_its_own_block(tmp_path, monkeypatch):
    target = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(section, "BENCHMARKS_MD", target)
    section.write_section("a", "first A")
    section.write_section("b", "only B")
    section.write_section("a", "second A")
    text = target.read_text()
    assert text.startswith(section.HEADER)
    assert "second A" in text and "first A" not in text and "only B" in text
    assert text.count("<!-- bench:a -->") == 1 and text.index("bench:a") < text.index("bench:b")


def test_chunk_recall_is_the_parity_recall_over_chunk_ids():
    exact = [[{"chunk_id": c} for c in "abcd"], [{"chunk_id": "x"}]]
    found = [[{"chunk_id": c} for c in "abzz"], []]
    assert figures.chunk_recall(found, exact) == pytest.approx((0.5 + 0.0) / 2)
    with pytest.raises(ValueError):
        figures.chunk_recall(found[:1], exact)  # one answer per query, or a clear error


def test_ms_reports_p50_and_p95_like_numpy():
    assert figures.ms([0.001, 0.002, 0.003, 0.004, 0.005]) == "3.0 / 4.8"


def test_timed_returns_the_median_and_the_last_result():
    calls = iter(range(5))
    seconds, result = figures.timed(lambda: next(calls), repeats=3)
    assert result == 2 and seconds >= 0.0


@pytest.mark.parametrize(
    ("per_cpu", "flagged"),
    [
        ([0.1, 0.2], False),
        ([1.0, 1.0], True),  # busy on average
        ([0.0] * 99 + [2.0], True),  # one peak, though the mean is low
    ],
)
def test_the_load_note_flags_a_busy_machine(per_cpu, flagged):
    monitor = machine_load.LoadMonitor()
    monitor.samples = [load * (os.cpu_count() or 1) for load in per_cpu]
    note = monitor.note()
    assert note.startswith("Machine load") and ("Unrepresentative" in note) == flagged


def test_the_load_monitor_samples_from_start_to_stop():
    with machine_load.LoadMonitor(every=0.01) as load:
        pass
    assert len(load.samples) >= 2
