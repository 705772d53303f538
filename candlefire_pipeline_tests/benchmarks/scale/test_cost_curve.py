"""The cost curve's per-size results: a partial run keeps what it did not measure."""

from __future__ import annotations

import json

from benchmarks.scale import cost_curve as bench_scale


def test_a_partial_run_keeps_the_sizes_earlier_figures(tmp_path):
    path = tmp_path / "1000000.json"
    earlier = {
        "layouts": {"vector": "v0", "halfvec": "h0", "binary": "b0"}, "efforts": [],
        "chroma": {"load": "c0"}, "load_note": "quiet (04:03)",
    }  # fmt: skip
    now = {"layouts": {"vector": "v1"}, "efforts": ["e1"], "load_note": "quiet (05:40)."}
    assert bench_scale.merged(dict(now), tmp_path / "none.json") == now  # nothing earlier
    path.write_text(json.dumps(earlier))
    result = bench_scale.merged(dict(now), path)
    assert result["layouts"] == {"vector": "v1", "halfvec": "h0", "binary": "b0"}
    assert result["efforts"] == ["e1"] and result["chroma"] == {"load": "c0"}
    assert result["load_note"] == (
        "quiet (05:40). Kept from an earlier run (halfvec, binary, Chroma): quiet (04:03)"
    )
