"""The report's plots: valid PNGs beside the markdown, linked by relative path, deterministic."""

from __future__ import annotations

import io
import json
import re

import pytest
from PIL import Image

from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report import plots
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.parity.report.markdown import report_markdown
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

EMBEDDER = HashingEmbedder(dim=32)
DOCS = ["SPG302 restores synapses", "tofersen lowers SOD1", "riluzole and survival", "rotarod"]
STORES = ("chroma", "pgvector", "qdrant", "memory")


@pytest.fixture(scope="module")
def report() -> ParityReport:
    chunks = [chunk(str(200 + i), 0, document=d) for i, d in enumerate(DOCS)]
    rows = make_rows(chunks, EMBEDDER.embed(DOCS), model_id=EMBEDDER.model_id)
    stores = {name: MemoryBackend() for name in STORES}
    for store in stores.values():
        store.replace_papers(rows)
    stores["qdrant"].delete_papers(["203"])  # one column differs from the oracle
    queries = [ParityQuery(f"q{i}", text, terms=(text.split()[0],)) for i, text in enumerate(DOCS)]
    return run_parity({n: Retriever(s, EMBEDDER) for n, s in stores.items()}, queries)


def test_every_plot_is_a_png_with_one_panel_per_store(report, tmp_path):
    json_path, md_path = write_report(report, tmp_path)
    assert set(report.plots) == set(plots.PLOTS) == {"stages", "latency", "overlap"}
    for kind, name in report.plots.items():
        assert name == f"parity-{report.report_id}-{kind}.png"
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
        # one 2.6 x 2.3 inch panel per store at 72 dpi: small, and wider with every store
        assert (width, height) == (int(2.6 * 72 * 3), int(2.3 * 72))
        assert len(data) < 60_000
    assert ParityReport.from_dict(json.loads(json_path.read_text())) == report


def test_the_markdown_links_the_plots_by_relative_path(report, tmp_path):
    _, md_path = write_report(report, tmp_path)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md_path.read_text())
    assert links == list(report.plots.values())
    assert all((md_path.parent / link).is_file() for link in links)
    inline = report_markdown(report, image_link=lambda name: f"data:image/png;base64,{name}")
    assert inline.count("](data:image/png;base64,") == 3


def test_the_same_report_renders_the_same_bytes(report):
    first, second = plots.render_plots(report), plots.render_plots(report)
    assert first == second and all(first.values())


def test_the_plots_show_what_the_report_measured(report):
    # qdrant lost a paper: its overlap histogram is not all at 1.0 like the others'
    overlaps = {s: [row.vs_oracle[s]["overlap"] for row in report.queries] for s in report.stores()}
    assert min(overlaps["qdrant"]) < 1.0 == min(overlaps["chroma"])
    differing = plots.overlap_plot(report)
    identical = plots.overlap_plot(without_qdrant_loss(report))
    assert differing != identical


def without_qdrant_loss(report: ParityReport) -> ParityReport:
    data = report.to_dict()
    for row in data["queries"]:
        row["vs_oracle"]["qdrant"]["overlap"] = 1.0
    return ParityReport.from_dict(data)


def test_a_report_without_queries_or_timings_has_no_plots(report, tmp_path):
    data = report.to_dict()
    data["aggregates"] = {k: v for k, v in data["aggregates"].items() if k != "stage_latency_ms"}
    bare = ParityReport.from_dict(data)
    assert plots.render_plots(bare) == {}
    write_report(bare, tmp_path)
    assert bare.plots == {} and "## Plots" not in report_markdown(bare)
