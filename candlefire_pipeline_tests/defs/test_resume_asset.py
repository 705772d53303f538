"""The store asset finishes a batch whose apply was cut, says so, and the blocking checks pass."""

import dagster as dg
import pyarrow.parquet as pq

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline_tests.defs.pipeline_harness import (
    Pipeline,
    check_results,
    metadata,
    pipeline_env,
)


def test_next_ingest_finishes_a_cut_chroma_apply(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    first, second, third = (p.name for p in write_demo_drops(settings.drops_dir))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        assert pipeline.ingest(first).success and pipeline.ingest(second).success
        # as if the Chroma write of `second` had been cut: its papers gone, no applied record
        batch = settings.batch_dir(second)
        (batch / "applied-chroma.json").rename(batch / "applying-chroma.json")
        pmids = pq.read_table(batch / "papers.parquet")["pmid"].to_pylist()
        chroma = open_backend("chroma", settings)
        try:
            assert chroma.delete_papers(pmids) > 0
        finally:
            chroma.close()

        result = pipeline.ingest(third)
        assert result.success
        assert metadata(result, "chroma_chunks")["resumed_batches"] == second
        assert metadata(result, "pgvector_chunks")["resumed_batches"] == "none"
        checks = check_results(result)
        assert checks["chroma_holds_current_versions"] and checks["stores_agree"]
    assert not (batch / "applying-chroma.json").exists()
    assert (batch / "applied-chroma.json").exists()
