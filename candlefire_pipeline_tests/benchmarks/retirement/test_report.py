"""The unretire section's figures: medians over repeats part by part (the rebuild pass and the
catch-up pass are two calls of one function), the time outside the parts, and the cost line."""

from __future__ import annotations

import pytest

from benchmarks.common.figures import MB
from benchmarks.retirement.report import markdown, medians, other_seconds


def unretire_run(seconds, rebuild, check, rows=1_000, peak=300 * MB) -> dict:
    return {"seconds": seconds, "process_seconds": seconds + 2, "rows_written": rows,
            "peak_rss": peak, "parts": {"rebuild": rebuild, "differing": [check]}}  # fmt: skip


RUNS = [
    unretire_run(10.0, [8.0, 0.5], 0.4),
    unretire_run(12.0, [9.0, 0.7], 0.6, peak=350 * MB),
    unretire_run(30.0, [25.0, 2.0], 1.0),  # a slow outlier: the medians ignore it
]


def test_medians_are_taken_call_by_call_and_the_peak_is_the_highest():
    figures = medians(RUNS)
    assert (figures["seconds"], figures["process_seconds"]) == (12.0, 14.0)
    assert figures["rebuild"] == [9.0, 0.7] and figures["differing"] == [0.6]
    assert figures["peak_rss"] == 350 * MB
    assert other_seconds(figures) == pytest.approx(12.0 - 9.0 - 0.7 - 0.6)


def test_an_operation_without_parts_has_no_other_time():
    load = {"seconds": 5.0, "process_seconds": 8.0, "rows_written": 1_000, "peak_rss": MB}
    assert other_seconds(medians([load])) is None


def test_the_section_says_what_a_rollback_after_retirement_costs():
    load = {"seconds": 6.0, "process_seconds": 9.0, "rows_written": 1_000, "peak_rss": 200 * MB}
    kept = [unretire_run(3.0, [1.5, 0.4], 0.3, rows=200)]
    result = {"size": 62_196, "drops": 10, "passed_over": 2, "pg_apply_seconds": 4.0,
              "folder_bytes": 50 * MB, "repeats": 3,
              "runs": {"first load": [load], "unretire, folder deleted": RUNS,
                       "unretire, folder kept": kept}}  # fmt: skip
    text = markdown([result], "Machine load: quiet.")
    deleted = "| 62,196 | unretire, folder deleted | 1,000 | **12.0** | 9.0 | 0.7 | 0.6 | 1.7 |"
    assert deleted in text
    assert "| 62,196 | first load | 1,000 | **6.0** | - | - | - | - |" in text
    assert "**0.2 min** of `candlefire unretire chroma` with the folder deleted (2.00x" in text
    assert "0.1 min with the folder kept and 2 drops (200 chunks) passed over" in text
    assert "Chroma's folder 50 MB; pgvector's apply of the same drops 4.0 s" in text
    assert text.endswith("Machine load: quiet.")
