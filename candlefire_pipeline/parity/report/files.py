"""A parity report's files: parity-<id>.json, parity-<id>.md and its PNG plots, in one folder.

The report itself (parity/report/model.py) is data; this module writes it and reads the newest back.
"""

from __future__ import annotations

import json
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import ParityReport

REPORT_GLOB = "parity-*.json"


def write_report(report: ParityReport, reports_dir: Path) -> tuple[Path, Path]:
    """Write the plots, parity-<id>.md and .json atomically; return (json_path, md_path).

    Sets report.plots (plot kind -> PNG file name) before the Markdown and JSON name them.
    """
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    report.plots = _write_plots(report, reports_dir)
    md_path = write_atomic(reports_dir / f"parity-{report.report_id}.md", report_markdown(report))
    # JSON last: load_latest only sees a report once every file it names exists.
    json_path = write_atomic(reports_dir / f"parity-{report.report_id}.json", report.to_json())
    return json_path, md_path


def _write_plots(report: ParityReport, reports_dir: Path) -> dict[str, str]:
    """parity-<id>-<kind>.png beside the Markdown; plot kind -> file name."""
    # matplotlib loads only when a report is written (status and the reader never plot)
    from candlefire_pipeline.parity.report.plots import render_plots

    names = {}
    for kind, png in render_plots(report).items():
        name = f"parity-{report.report_id}-{kind}.png"
        write_atomic(reports_dir / name, png)
        names[kind] = name
    return names


def load_latest(reports_dir: Path) -> ParityReport | None:
    """The newest report in reports_dir (ids start with a UTC timestamp), or None."""
    paths = sorted(Path(reports_dir).glob(REPORT_GLOB)) if Path(reports_dir).is_dir() else []
    if not paths:
        return None
    return ParityReport.from_dict(json.loads(paths[-1].read_text(encoding="utf-8")))
