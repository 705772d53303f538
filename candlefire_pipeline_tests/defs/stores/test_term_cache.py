"""The pgvector store asset keeps the term cache exact through a drop and tells the UI what it
cost; `candlefire status` shows the cache."""

from __future__ import annotations

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import demo_pipeline, metadata


def test_a_drop_keeps_the_cache_exact_and_says_what_the_upkeep_cost(
    tmp_path, monkeypatch, pg_dsn, capsys
):
    with demo_pipeline(monkeypatch, tmp_path, pg_dsn) as (_, pipeline, (first, second, _)):
        assert metadata(pipeline.ingest(first), "pgvector_chunks")["term_cache_entries"] == 0
        settings = Settings.from_env()
        with opened_backend("pgvector", settings) as store:
            retriever = Retriever(store, embedder_for(settings, "query"))
            retriever.retrieve("tofersen in SOD1 ALS", ["SOD1", "TDP-43"], ["SPG302"])
            kept = store.terms.stats.kept
        assert kept > 0
        pg = metadata(pipeline.ingest(second), "pgvector_chunks")
        assert pg["term_cache_entries"] == kept and pg["term_cache_entries_changed"] > 0
        assert 0.0 < pg["term_cache_upkeep_share"] < 1.0 and pg["term_cache_mb"] > 0
        assert pg["term_cache_upkeep_beside_copy_seconds"] > 0  # read beside the COPY
        assert "term_cache_cleared" not in pg
        with opened_backend("pgvector", settings) as store:
            checked = audit(store)
        assert checked.checked == kept and checked.exact, checked.differences[:3]
        assert candlefire(["status"]) == 0
        assert f"pgvector: term cache {kept} entries" in capsys.readouterr().out
