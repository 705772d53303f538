"""The cost curve's report: the growth exponent and what bounds the recall at the largest size."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.scale import report as scale_report


def test_build_exponent_of_the_cost_curve():
    assert scale_report.exponent([1_000, 10_000], [2.0, 20.0]) == pytest.approx(1.0)
    assert scale_report.exponent([1_000, 10_000], [2.0, 200.0]) == pytest.approx(2.0)
    assert np.isnan(scale_report.exponent([1_000], [2.0]))


@pytest.mark.parametrize(("finals", "shipped", "said"), [
    ((0.97, 0.98), 0.95, "No measured ef reached 0.99 at 1,000,000."),
    ((0.97, 0.995), 0.95, "ef 1000 / 1000 reaches **0.9950**"),
    ((0.97, 0.98), 0.996, "ef 200 / 200 reaches **0.9960**"),  # the shipped effort counts too
])  # fmt: skip
def test_the_recall_bound_names_the_smallest_ef_that_reached_the_goal(finals, shipped, said):
    query = {"recall": {"final": shipped, "semantic": 0.9, "entities": 0.92},
             "stage_p50": {"entities": 0.3}, "stage_p95": {"entities": 1.2}}  # fmt: skip
    efforts = [
        {"ef_search": ef, "ef_search_entities": ef,
         "query": {**query, "recall": {**query["recall"], "final": final}}}
        for ef, final in zip((400, 1000), finals, strict=True)
    ]  # fmt: skip
    result = {"size": 1_000_000, "ann": {"ef_search": 200, "ef_search_entities": 200},
              "layouts": {"vector": {"query": query}}, "efforts": efforts}  # fmt: skip
    text = scale_report._recall_bound([result])
    assert "semantic 0.9000, entities 0.9200" in text and said in text
