"""parity_report over every fed store through Dagster: Qdrant gets a column and plots, and a
Qdrant that diverges, crawls or is down never blocks the flip between Chroma and pgvector."""

from __future__ import annotations

import base64
import re
from contextlib import contextmanager

import dagster as dg
import pytest

from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.defs.resources import QdrantResource
from candlefire_pipeline.operations.serving.machine import read_state
from candlefire_pipeline.parity.gates import GATES
from candlefire_pipeline.parity.report.files import load_latest
from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    SlowReads,
    check_results,
    metadata,
    pipeline_env,
)
from candlefire_pipeline_tests.parity.test_harness_stores import LowerCasing


class BrokenQdrantResource(QdrantResource):
    """Qdrant whose substring search folds case and whose reads are slow (4x + 50 ms)."""

    @contextmanager
    def open(self):
        with super().open() as backend:
            yield SlowReads(LowerCasing(backend), delay_s=0.05)


@pytest.fixture
def demo(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    assert settings.stores == ("pgvector", "chroma", "qdrant")
    first = write_demo_drops(settings.drops_dir)[0].name
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(first).success
        yield settings, pipeline


def plot_images(markdown: str) -> list[bytes]:
    found = re.findall(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    return [base64.b64decode(data) for data in found]


def test_a_diverging_slow_qdrant_is_reported_and_the_flip_still_happens(demo):
    settings, pipeline = demo
    result = pipeline.parity(overrides={"qdrant": BrokenQdrantResource()})
    assert set(check_results(result)) == {*GATES, "serving_not_degraded"}
    assert not [name for name, passed in check_results(result).items() if not passed]
    meta = metadata(result, "serving_backend")
    assert (meta["serving_backend"], meta["decision"]) == ("pgvector", "changed")

    report = load_latest(settings.reports_dir)
    assert report.evaluated_stores() == ["qdrant"] and report.unavailable == {}
    # hashing-v1 ties make every HNSW store lose a PMID to the exact oracle now and then
    # (ann_miss, order); only qdrant's case folding gives "case" divergences
    assert "qdrant" in report.diverging_stores()
    kinds = {s: {d.kind for d in found} for s, found in report.store_divergences.items()}
    assert "case" in kinds["qdrant"] and all("case" not in kinds[s] for s in ("chroma", "pgvector"))
    assert report.store_column("qdrant")["grounding_agreement"] < 1.0
    assert report.latency("qdrant", "p50", True) > report.latency("pgvector", "p50", True)
    report_meta = metadata(result, "parity_report")
    assert report_meta["stores"] == "chroma (reference), pgvector (candidate), qdrant (evaluated)"
    assert "qdrant" in report_meta["diverging_stores"].split(", ")
    assert report_meta["oracle_divergences_qdrant"] > report_meta["oracle_divergences_pgvector"]
    # the plots on the asset page are the files beside the markdown, byte for byte
    on_disk = sorted((settings.reports_dir / name).read_bytes() for name in report.plots.values())
    assert len(on_disk) == 3 and sorted(plot_images(report_meta["plots"])) == on_disk
    assert sorted(plot_images(report_meta["report"])) == on_disk
    md = (settings.reports_dir / f"parity-{report.report_id}.md").read_text()
    assert "](data:" not in md and all(f"]({name})" in md for name in report.plots.values())


def test_an_unreachable_qdrant_is_left_out_and_the_flip_still_happens(demo):
    settings, pipeline = demo
    down = QdrantResource(url=f"http://127.0.0.1:{procs.free_port()}")
    result = pipeline.parity(overrides={"qdrant": down})
    assert not [name for name, passed in check_results(result).items() if not passed]
    assert read_state(settings.serving_file).backend == "pgvector"
    report = load_latest(settings.reports_dir)
    assert report.stores() == ["chroma", "pgvector"] and list(report.unavailable) == ["qdrant"]
    assert "qdrant" not in report.store_diffs
    meta = metadata(result, "parity_report")
    assert meta["unavailable_stores"] == "qdrant"
    assert "**qdrant was not evaluated**" in meta["report"]
