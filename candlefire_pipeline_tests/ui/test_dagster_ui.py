"""The Dagster UI in a real headless Chromium: asset graph and the parity report page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg_server import EmbeddedPostgres
from candlefire_pipeline.settings import REPO_ROOT
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.ui.browser import HeadlessChromium
from candlefire_pipeline_tests.ui.dagster_dev import DagsterDev, running_dagster_dev

pytestmark = pytest.mark.slow

ASSETS = (
    "papers", "chunks", "embeddings", "pgvector_chunks", "chroma_chunks", "qdrant_chunks",
    "parity_report", "serving_backend",
)  # fmt: skip
SCREENSHOTS = REPO_ROOT / "artifacts" / "ui"
CANDLEFIRE = Path(sys.executable).with_name("candlefire")

# Text of the asset-name label of every node drawn in the lineage graph (SVG foreignObjects).
GRAPH_NODE_NAMES_JS = """
Array.from(document.querySelectorAll('svg foreignObject'))
  .map(fo => fo.querySelector('[class*="assetName"]') || fo)
  .map(el => el.textContent.trim())
"""
SHOW_MARKDOWN = "[Show Markdown]"
SCROLL_TO_REPORT_TOP_JS = """
Array.from(document.querySelectorAll('h1'))
  .filter(h => h.textContent.startsWith('Parity report'))
  .forEach(h => h.scrollIntoView())
"""
TABLE_HEADERS_JS = "Array.from(document.querySelectorAll('th')).map(th => th.textContent.trim())"


def _pipeline_env(data_dir: Path) -> dict[str, str]:
    """The environment of `make ui`, rooted in a temp data dir, with the fast embedder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANDLEFIRE_")}
    env.update(
        CANDLEFIRE_DATA_DIR=str(data_dir),
        CANDLEFIRE_EMBED_MODEL="hashing-v1",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="module")
def ui_workdir() -> Iterator[Path]:
    # the demo's embedded Postgres runs as another user: see procs.scratch_dir
    with procs.scratch_dir("ui") as root:
        yield root


@pytest.fixture(scope="module")
def dagster_ui(ui_workdir: Path) -> Iterator[DagsterDev]:
    """`dagster dev -m candlefire_pipeline.definitions` on a temp DAGSTER_HOME and data dir."""
    home, data_dir = ui_workdir / "dagster_home", ui_workdir / "data"
    home.mkdir()
    # the same instance config `make ui` copies into .dagster_home
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    with running_dagster_dev(
        ["-m", "candlefire_pipeline.definitions"],
        home=home,
        env=_pipeline_env(data_dir),
        log_path=ui_workdir / "dagster_dev.log",
        cwd=ui_workdir,
    ) as dev:
        dev.wait_until_loaded()
        dev.dismiss_onboarding()
        # The drop sensor would launch its own ingest runs for the demo drops, racing the
        # CLI runs below on the same stores; stop it the way an operator does in the UI.
        assert dev.stop_sensor("pubmed_drops_sensor") == "STOPPED"
        try:
            yield dev
        finally:
            # `candlefire demo` leaves the embedded Postgres running for later processes (by
            # design); it lives outside dagster dev's process group, so stop it explicitly.
            EmbeddedPostgres(data_dir / "pg").stop()
    assert not procs.group_and_descendants(dev.proc.pid)
    assert not EmbeddedPostgres(data_dir / "pg").is_running()


@pytest.fixture(scope="module")
def browser(ui_workdir: Path) -> Iterator[HeadlessChromium]:
    chromium = HeadlessChromium(ui_workdir / "chromium")
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="module")
def demo_materialized(dagster_ui: DagsterDev, ui_workdir: Path) -> Path:
    """`candlefire demo` (every asset through the Dagster CLI) into the UI's instance."""
    log_path = ui_workdir / "demo.log"
    env = {**_pipeline_env(ui_workdir / "data"), "DAGSTER_HOME": str(dagster_ui.home)}
    with open(log_path, "wb") as log:
        done = subprocess.run(
            [CANDLEFIRE, "demo"], env=env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT
        )
    assert done.returncode == 0, procs.log_tail(log_path, 60)
    return ui_workdir / "data"


def _markdown_headers(markdown: str) -> set[str]:
    """Header cells of every markdown table (a row followed by a |---| separator)."""
    lines = markdown.splitlines()
    headers: set[str] = set()
    for row, separator in zip(lines, lines[1:], strict=False):
        if row.startswith("|") and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", separator.strip()):
            headers.update(cell.strip() for cell in row.strip().strip("|").split("|"))
    return headers


def test_asset_graph_draws_every_asset(dagster_ui: DagsterDev, browser: HeadlessChromium):
    browser.goto(f"{dagster_ui.url}/asset-groups")
    # With several groups the global graph starts collapsed to one box per group (ingest,
    # stores, parity); Alt+E is the UI's "Expand all groups" shortcut.
    browser.wait_for(
        lambda: len(browser.evaluate(GRAPH_NODE_NAMES_JS)) > 0,
        describe=lambda: f"no graph drawn; page text: {browser.body_text()[:2000]}",
    )
    if not set(ASSETS) & set(browser.evaluate(GRAPH_NODE_NAMES_JS)):
        browser.press_key("KeyE", "e", alt=True)
    browser.wait_for(
        lambda: set(ASSETS) <= set(browser.evaluate(GRAPH_NODE_NAMES_JS)),
        describe=lambda: f"graph nodes: {browser.evaluate(GRAPH_NODE_NAMES_JS)}",
    )
    browser.screenshot(SCREENSHOTS / "asset_graph.png")


def test_parity_report_page_renders_its_tables(
    dagster_ui: DagsterDev, browser: HeadlessChromium, demo_materialized: Path
):
    reports = sorted((demo_materialized / "reports").glob("parity-*.md"))
    assert reports, "the demo wrote no parity report"
    markdown = reports[-1].read_text()
    expected = _markdown_headers(markdown)
    assert {"gate", "query"} <= expected  # the gate and per-query tables exist at all
    report_id = re.search(r"^# Parity report (\S+)", markdown, re.M).group(1)

    browser.goto(f"{dagster_ui.url}/assets/parity_report")

    def headers() -> set[str]:
        return set(browser.evaluate(TABLE_HEADERS_JS))

    # The UI renders short markdown inline and a long one (this report) behind a
    # "[Show Markdown]" link that opens a dialog.
    browser.wait_for(
        lambda: expected <= headers() or SHOW_MARKDOWN in browser.body_text(),
        describe=lambda: f"no report table; page text: {browser.body_text()[:3000]}",
    )
    if not expected <= headers():
        browser.click_text(SHOW_MARKDOWN)
    browser.wait_for(
        lambda: expected <= headers(), describe=lambda: f"missing headers: {expected - headers()}"
    )
    assert f"Parity report {report_id}" in browser.body_text()
    browser.evaluate(SCROLL_TO_REPORT_TOP_JS)
    browser.screenshot(SCREENSHOTS / "parity_report.png")
