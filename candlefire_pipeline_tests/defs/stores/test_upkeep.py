"""The pgvector store asset checks its trigram GIN after a large write (within bound, rebuilt
past it without losing a row) and builds the phrase index where it is missing, never failing a
committed write."""

from __future__ import annotations

import psycopg

from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.defs.stores import assets as store_assets
from candlefire_pipeline.operations import maintenance
from candlefire_pipeline.operations.maintenance import REINDEX_BLOAT
from candlefire_pipeline_tests.defs.pipeline_harness import check_results, demo_pipeline, metadata


def test_the_pgvector_asset_keeps_its_trigram_index_in_bound(tmp_path, monkeypatch, pg_dsn):
    with demo_pipeline(monkeypatch, tmp_path, pg_dsn) as (_, pipeline, (first, second, third)):
        built = metadata(pipeline.ingest(first), "pgvector_chunks")
        # 651 chunks written through the pending list: a few MB over a fresh build, not rebuilt
        assert built["gin_bloat"] > REINDEX_BLOAT, built
        assert "under the 16 MB a rebuild is worth" in built["gin_upkeep"]
        assert built["phrase_index"] == "built" and built["phrase_index_build_seconds"] > 0
        # every estimate is now past the bound: the next large write rebuilds the index
        monkeypatch.setattr(maintenance, "REINDEX_BLOAT", 0.0)
        monkeypatch.setattr(maintenance, "UPKEEP_MIN_EXCESS_BYTES", 0)
        result = pipeline.ingest(second)
        pg = metadata(result, "pgvector_chunks")
        assert pg["rows_written"] >= maintenance.UPKEEP_MIN_SHARE * pg["store_chunks"]
        assert pg["gin_upkeep"].startswith("reindexed in"), pg["gin_upkeep"]
        assert "gin_upkeep" not in metadata(result, "chroma_chunks")
        assert pg["phrase_index"] == "valid"  # kept by the write, not built again
        assert check_results(result)["stores_agree"]  # the rebuild lost nothing

        def unreachable(backend, rows_changed, live_rows):
            raise ConnectionError("server closed the connection")

        def refused(backend):
            raise psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")

        monkeypatch.setattr(store_assets, "gin_upkeep", unreachable)
        monkeypatch.setattr(PgVectorBackend, "build_phrase_index", refused)
        result = pipeline.ingest(third)
        assert result.success  # the write is committed; the check's failure is reported
        pg = metadata(result, "pgvector_chunks")
        assert pg["gin_upkeep"] == "not checked: ConnectionError"
        assert pg["phrase_index"] == "not built: LockNotAvailable"
