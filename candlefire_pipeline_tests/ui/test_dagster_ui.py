"""The Dagster UI in a real headless Chromium: asset graph and the parity report page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.serving.machine import read_state
from candlefire_pipeline.settings import REPO_ROOT
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.ui.browser import HeadlessChromium
from candlefire_pipeline_tests.ui.dagster_dev import DagsterDev, running_dagster_dev
from candlefire_pipeline_tests.ui.markdown_dialog import SHOW_MARKDOWN, show_markdown_until

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
SCROLL_TO_REPORT_TOP_JS = """
Array.from(document.querySelectorAll('h1'))
  .filter(h => h.textContent.startsWith('Parity report'))
  .forEach(h => h.scrollIntoView())
"""
TABLE_HEADERS_JS = "Array.from(document.querySelectorAll('th')).map(th => th.textContent.trim())"
# The plots rendered on the page: every <img> with a PNG data: URI, and its decoded width.
PLOT_IMAGES_JS = """
Array.from(document.querySelectorAll('img'))
  .filter(img => img.src.startsWith('data:image/png'))
  .map(img => ({alt: img.alt, complete: img.complete, width: img.naturalWidth}))
"""


def _pipeline_env(data_dir: Path) -> dict[str, str]:
    """The environment of `make demo` / `make ui`, rooted in a temp data dir, fast embedder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANDLEFIRE_")}
    env.update(
        CANDLEFIRE_DATA_DIR=str(data_dir),
        CANDLEFIRE_EMBED_MODEL="hashing-v1",
        CANDLEFIRE_SENSOR_INTERVAL="2",
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass(frozen=True)
class DemoRun:
    home: Path
    data_dir: Path
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def ui_workdir() -> Iterator[Path]:
    # the demo's embedded Postgres runs as another user: see procs.scratch_dir
    with procs.scratch_dir("ui") as root:
        try:
            yield root
        finally:
            # `candlefire demo` leaves the embedded Postgres running for later processes (by
            # design); it lives outside dg dev's process group, so stop it explicitly.
            EmbeddedPostgres(root / "data" / "pg").stop()
        assert not EmbeddedPostgres(root / "data" / "pg").is_running()


@pytest.fixture(scope="module")
def demo_run(ui_workdir: Path) -> DemoRun:
    """`make demo` first: `candlefire demo` (every step through `dg launch`) on a fresh home."""
    home, data_dir = ui_workdir / "dagster_home", ui_workdir / "data"
    home.mkdir()
    # the same instance config `make` copies into .dagster_home
    config = procs.instance_yaml((REPO_ROOT / "dagster.yaml").read_text())
    (home / "dagster.yaml").write_text(config)
    env = {**_pipeline_env(data_dir), "DAGSTER_HOME": str(home)}
    done = subprocess.run(
        [CANDLEFIRE, "demo"], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # the terminal output is an artifact too
    (SCREENSHOTS / "demo.out").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return DemoRun(home, data_dir, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def dagster_ui(demo_run: DemoRun, ui_workdir: Path) -> Iterator[DagsterDev]:
    """Then `make ui`: `dg dev -m candlefire_pipeline.definitions` on the demo's home, every
    sensor and schedule at its default status (the drop sensor running)."""
    with running_dagster_dev(
        ["-m", "candlefire_pipeline.definitions"],
        home=demo_run.home,
        env=_pipeline_env(demo_run.data_dir),
        log_path=ui_workdir / "dagster_dev.log",
        cwd=ui_workdir,
    ) as dev:
        dev.wait_until_loaded()
        dev.dismiss_onboarding()
        yield dev
    assert not procs.group_and_descendants(dev.proc.pid)


@pytest.fixture(scope="module")
def browser(ui_workdir: Path) -> Iterator[HeadlessChromium]:
    chromium = HeadlessChromium(ui_workdir / "chromium")
    try:
        yield chromium
    finally:
        chromium.close()


def _markdown_headers(markdown: str) -> set[str]:
    """Header cells of every markdown table (a row followed by a |---| separator)."""
    lines = markdown.splitlines()
    headers: set[str] = set()
    for row, separator in zip(lines, lines[1:], strict=False):
        if row.startswith("|") and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", separator.strip()):
            headers.update(cell.strip() for cell in row.strip().strip("|").split("|"))
    return headers


@contextmanager
def _instance(home: Path) -> Iterator[dg.DagsterInstance]:
    """The demo's instance (its dagster.yaml roots SQLite storage at $DAGSTER_HOME)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        with dg.DagsterInstance.from_config(str(home)) as instance:
            yield instance


def _latest_metadata(home: Path, asset: str) -> dict:
    with _instance(home) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_the_demo_tells_the_story_in_under_80_clean_lines(demo_run: DemoRun):
    lines = demo_run.stdout.splitlines()
    assert len(lines) < 80, demo_run.stdout
    assert demo_run.stderr == ""
    noise = ("Warning", "DEBUG", " INFO ", "alembic", "Traceback", "$ ")
    assert not [line for line in lines if any(word in line for word in noise)]
    for step in ("[1/4] ingest 0001-demo-initial.jsonl", "[4/4] parity report", "Summary", "Next"):
        assert step in lines or any(line.startswith(step) for line in lines), step
    # one line per step, with the counts of the materialization metadata
    papers = _latest_metadata(demo_run.home, "papers")  # the last drop: the MEDLINE one
    assert (
        f"    papers      {papers['records_in']} records in -> {papers['accepted']} accepted, "
        f"{papers['rejected']} rejected, {papers['deleted_pmids']} deletions"
    ) in lines
    assert "papers      183 records in -> 180 accepted, 3 rejected, 0 deletions" in demo_run.stdout
    for store in ("pgvector", "chroma"):
        chunks = _latest_metadata(demo_run.home, f"{store}_chunks")["store_chunks"]
        assert re.search(rf"^  {store}\s+{chunks}$", demo_run.stdout, re.M), store
    # every gate of the report with value and threshold, the serving state, what to run next
    for gate in ("grounding_agreement", "mean_overlap", "p95_ratio", "report_is_fresh"):
        assert re.search(rf"^  {gate}\s+\S+.*\s+(pass|FAIL)$", demo_run.stdout, re.M), gate
    serving = read_state(demo_run.data_dir / "serving_backend.json").backend
    assert f"  serving backend: {serving} (" in demo_run.stdout
    for hint in ("make ui", "candlefire query", "candlefire status"):
        assert hint in demo_run.stdout


def test_make_ui_after_make_demo_launches_no_run_again(dagster_ui: DagsterDev, demo_run: DemoRun):
    def ticked_twice() -> bool:
        ticks = dagster_ui.sensor("pubmed_drops_sensor")["sensorState"]["ticks"]
        return len([t for t in ticks if t["status"] in ("SKIPPED", "SUCCESS")]) >= 2

    procs.wait_until(
        ticked_twice,
        proc=dagster_ui.proc,
        log_path=dagster_ui.log_path,
        what="two drop-sensor ticks",
        limit_s=300,
    )
    ticks = dagster_ui.sensor("pubmed_drops_sensor")["sensorState"]["ticks"]
    assert all(not t["runIds"] for t in ticks), ticks
    assert any("3 already taken in" in (t["skipReason"] or "") for t in ticks), ticks
    with _instance(demo_run.home) as instance:
        runs = instance.get_runs()
    assert len(runs) == 4  # the demo's three ingest runs and its parity run, nothing else
    assert not [r for r in runs if r.tags.get("dagster/sensor_name")]


ROWS_JS = """
Array.from(document.querySelectorAll('tr'))
  .map(tr => Array.from(tr.querySelectorAll('td,th')).map(c => c.innerText.trim()))
"""


def test_parity_gates_show_on_the_report_page_without_a_dialog(
    dagster_ui: DagsterDev, browser: HeadlessChromium, demo_run: DemoRun
):
    gates = _latest_metadata(demo_run.home, "parity_report")["gates"]
    names = [line.split("|")[1].strip() for line in gates.splitlines()[2:]]
    assert "mean_overlap" in names and "report_is_fresh" in names
    browser.goto(f"{dagster_ui.url}/assets/parity_report")

    def gate_rows() -> set[str]:
        return {row[0] for row in browser.evaluate(ROWS_JS) if len(row) == 5}

    browser.wait_for(
        lambda: {"gate", *names} <= gate_rows(),
        describe=lambda: f"gate rows {gate_rows()}; page: {browser.body_text()[:2000]}",
    )
    assert {"gate", "result", "value", "threshold"} <= set(browser.evaluate(TABLE_HEADERS_JS))
    browser.screenshot(SCREENSHOTS / "parity_gates.png")


def test_the_serving_state_shows_on_its_asset_page(
    dagster_ui: DagsterDev, browser: HeadlessChromium, demo_run: DemoRun
):
    serving = read_state(demo_run.data_dir / "serving_backend.json").backend
    browser.goto(f"{dagster_ui.url}/assets/serving_backend")

    rule = "promotes to pgvector only from the never-promoted state"

    def shown() -> bool:  # metadata rows are (key, timestamp, value)
        rows = browser.evaluate(ROWS_JS)
        row = any(len(r) == 3 and r[0] == "serving_backend" and r[2] == serving for r in rows)
        # the description renders apart from the metadata: a loaded machine showed one first
        return row and rule in browser.body_text()

    browser.wait_for(
        shown,
        describe=lambda: f"no serving_backend row or rule; page: {browser.body_text()[:2000]}",
    )
    browser.screenshot(SCREENSHOTS / "serving_backend.png")


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
    dagster_ui: DagsterDev, browser: HeadlessChromium, demo_run: DemoRun
):
    reports = sorted((demo_run.data_dir / "reports").glob("parity-*.md"))
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
    show_markdown_until(
        browser,
        "report",
        lambda: expected <= headers(),
        describe=lambda: f"missing headers: {expected - headers()}",
    )
    assert f"Parity report {report_id}" in browser.body_text()
    browser.evaluate(SCROLL_TO_REPORT_TOP_JS)
    browser.screenshot(SCREENSHOTS / "parity_report.png")


def test_parity_plots_load_as_images_on_the_report_page(
    dagster_ui: DagsterDev, browser: HeadlessChromium, demo_run: DemoRun
):
    plots = _latest_metadata(demo_run.home, "parity_report")["plots"]
    titles = re.findall(r"!\[([^\]]+)\]\(data:image/png;base64,", plots)
    assert len(titles) == 3, plots[:500]
    browser.goto(f"{dagster_ui.url}/assets/parity_report")

    def loaded() -> list[dict]:
        return [i for i in browser.evaluate(PLOT_IMAGES_JS) if i["complete"] and i["width"] > 0]

    browser.wait_for(
        lambda: bool(loaded()) or SHOW_MARKDOWN in browser.body_text(),
        describe=lambda: f"no plots nor markdown link; page: {browser.body_text()[:2000]}",
    )
    # decoded by the browser, not just an <img> tag: naturalWidth is 0 for a broken image
    show_markdown_until(
        browser,
        "plots",
        lambda: {i["alt"] for i in loaded()} >= set(titles),
        describe=lambda: f"plots on the page: {browser.evaluate(PLOT_IMAGES_JS)}",
    )
    assert all(i["width"] > 100 for i in loaded())
    browser.screenshot(SCREENSHOTS / "parity_plots.png")
