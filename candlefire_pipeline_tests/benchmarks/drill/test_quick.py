"""The drill benchmark's --quick run: every stage killed once on the scaled corpus, every point
survives, and the section names each point's place and outcome."""

from __future__ import annotations

import pytest

from benchmarks import __main__ as cli
from benchmarks import registry
from benchmarks.common import options
from benchmarks.common.section import Output
from benchmarks.drill.benchmark import POINTS
from benchmarks.drill.run import per_stage, run, section_of

pytestmark = pytest.mark.server


def test_the_quick_drill_kills_every_stage_once_and_reports_each_point(
    shared_data, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CANDLEFIRE_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path / "bench"))
    parser = cli.build_parser(registry.benchmarks())
    args = options.resolve(parser.parse_args(["drill", "--quick"]))
    run(args, Output("drill", ("drill",), writes=False))
    printed = capsys.readouterr().out
    assert f"**kill points: {len(POINTS)} survived of {len(POINTS)} tried**" in printed
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "ms |" in line]
    assert sorted(row.split(" | ")[1] for row in rows) == sorted(POINTS)
    assert all(row.endswith("| survived |") for row in rows)


@pytest.mark.parametrize(
    ("points", "stages", "expected", "section"),
    [
        (0, list(POINTS), POINTS, "drill"),
        (2, ["adopt", "copy"], {"copy": 2, "adopt": 2}, "drill-stages"),
        (0, ["adopt"], {"adopt": POINTS["adopt"]}, "drill-stages"),
    ],
)
def test_a_run_of_some_stages_schedules_only_them_and_keeps_the_full_runs_section(
    points, stages, expected, section
):
    assert per_stage(points, stages) == expected
    assert section_of(stages) == section
