"""The store asset finishes a batch whose apply was cut, says so, and the blocking checks pass."""

import pyarrow.parquet as pq

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline_tests.defs.pipeline_harness import check_results, demo_pipeline, metadata


def test_next_ingest_finishes_a_cut_chroma_apply(tmp_path, monkeypatch, pg_dsn):
    with demo_pipeline(monkeypatch, tmp_path, pg_dsn) as (settings, pipeline, drops):
        first, second, third = drops
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
