"""The effort benchmark's choice of a stage's ef_search over several HNSW builds."""

from __future__ import annotations

from benchmarks.retrieval import effort as bench_effort


def test_effort_choice_is_the_smallest_that_clears_the_target_on_every_build():
    points = [
        {"ef": (200, ef), "final": final, "build": build}
        for build, finals in enumerate(([0.97, 0.995, 1.0], [0.995, 0.992, 1.0]))
        for ef, final in zip((20, 40, 100), finals, strict=True)
    ]
    # 20 fails build 0; 40 fails build 1 (0.992 < 0.993); 100 clears both
    assert bench_effort.smallest(points, "entities", builds=2) == 100
    assert bench_effort.smallest(points[:2], "entities", builds=2) == 40  # nothing clears: top
