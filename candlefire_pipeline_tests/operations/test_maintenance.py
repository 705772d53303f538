"""`candlefire maintain` on real stores: a churned pgvector table (autovacuum off, so the dead
weight is certain) is reported, left alone by the dry run and repaired by --apply; empty and
unreachable stores; the CLI's exit codes."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext

from candlefire_pipeline.backends.pg import health as pg_health
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations import maintenance
from candlefire_pipeline.operations.maintenance import (
    REINDEX_BLOAT,
    format_maintenance,
    gin_upkeep,
    maintain,
    pgvector_health,
)
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

PAPERS, DIM, CHURNS = 1_500, 16, 3


def churned(store):
    """PAPERS papers, then every one replaced CHURNS times with no vacuum in between."""
    store.ensure_schema("test", DIM)
    store.conn.execute(f"ALTER TABLE {store.names.table} SET (autovacuum_enabled = false)")
    chunks = [chunk(str(i), document=f"paper {i} about SOD1 and TDP-43") for i in range(PAPERS)]
    for seed in range(CHURNS + 1):
        store.replace_papers(make_rows(chunks, unit_vectors(PAPERS, DIM, seed=seed), dim=DIM))
    store.conn.execute("SELECT pg_stat_force_next_flush()")
    return store


def index_oids(store) -> dict[str, int]:
    rows = store.conn.execute(
        "SELECT indexrelid::regclass::text, indexrelid::oid FROM pg_index"
        " WHERE indrelid = %s::regclass",
        [store.names.table],
    ).fetchall()
    return dict(rows)


def stores_of(settings, **opened):
    return lambda name: nullcontext(opened[name])


def test_a_churned_table_is_reported_then_repaired_by_apply(
    make_backend, tmp_path, monkeypatch, pg_dsn
):
    store = churned(make_backend("pgvector"))
    chroma = make_backend("chroma")
    settings = dataclasses.replace(
        pipeline_env(monkeypatch, tmp_path / "data", pg_dsn), stores=("pgvector", "chroma")
    )
    before, hashes = index_oids(store), store.chunk_hashes()

    dry = maintain(
        settings, apply=False, open_store=stores_of(settings, pgvector=store, chroma=chroma)
    )
    pg = dry.stores[0]
    assert pg.figures["live_tuples"] == PAPERS and pg.figures["dead_tuples"] == CHURNS * PAPERS
    assert pg.figures["hnsw_bloat"] > REINDEX_BLOAT  # four graphs' worth of elements, one live
    kinds = {(a.kind, a.target) for a in pg.actions}
    assert ("vacuum", store.names.table) in kinds
    assert ("reindex", f"{store.names.table}_embedding_hnsw") in kinds
    assert ("build", f"{store.names.table} phrase index") in kinds  # never built on this table
    assert not any(a.done for a in dry.actions) and index_oids(store) == before  # dry run
    assert dry.stores[1].figures["chunks"] == 0 and not dry.stores[1].actions
    text = format_maintenance(dry)
    assert "dry run" in text and "to do (--apply runs it)" in text

    done = maintain(
        settings, apply=True, open_store=stores_of(settings, pgvector=store, chroma=chroma)
    )
    pg = done.stores[0]
    assert all(a.done and a.error is None for a in pg.actions) and not done.failed
    assert pg.figures["after_dead_tuples"] == 0
    assert pg.figures["after_hnsw_bloat"] < REINDEX_BLOAT
    rebuilt = index_oids(store)
    for action in pg.actions:
        if action.kind == "reindex":
            assert rebuilt[action.target] != before[action.target]  # a new index took its place
    health = pg_health.table_health(store.conn, store.names.table)
    assert all(index.valid for index in health.indexes)
    assert store.chunk_hashes() == hashes  # nothing lost
    assert store.phrase_ready()
    # and the next run finds nothing to do
    again = maintain(
        settings, apply=True, open_store=stores_of(settings, pgvector=store, chroma=chroma)
    )
    assert again.actions == []


def test_an_empty_store_has_nothing_to_maintain(make_backend):
    health = pgvector_health(make_backend("pgvector"))
    assert health.actions == [] and "does not exist yet" in health.notes[0]


def test_a_freshly_built_table_needs_its_phrase_index_only_and_its_estimate_is_close(make_backend):
    store = make_backend("pgvector", bulk_rebuild_rows=100)  # indexes built after the load
    chunks = [chunk(str(i)) for i in range(PAPERS)]
    store.replace_papers(make_rows(chunks, unit_vectors(PAPERS, DIM), dim=DIM))
    store.conn.execute(f"VACUUM (ANALYZE) {store.names.table}")
    health = pgvector_health(store)
    assert [a.kind for a in health.actions] == ["build"]  # a first build leaves out the phrase GIN
    assert 0.8 < health.figures["hnsw_bloat"] < 1.25  # the sample build predicts a fresh build
    assert health.figures["gin_bloat"] < REINDEX_BLOAT
    store.build_phrase_index()
    health = pgvector_health(store)
    assert health.actions == [] and health.figures["phrase_gin_bloat"] < REINDEX_BLOAT


def test_the_cli_dry_runs_by_default_and_fails_on_an_unreachable_store(
    tmp_path, monkeypatch, capsys, pg_dsn
):
    pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    assert candlefire(["maintain"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "pgvector:" in out and "chroma: chunks 0" in out
    monkeypatch.setenv("CANDLEFIRE_PG_DSN", "postgresql://u:secret@127.0.0.1:1/db")
    assert candlefire(["maintain", "--apply"]) == 2
    out = capsys.readouterr().out
    assert "pgvector: UNREACHABLE - BackendUnavailableError" in out and "secret" not in out


def test_a_large_write_rebuilds_a_grown_trigram_index_and_loses_nothing(make_backend, monkeypatch):
    store = churned(make_backend("pgvector"))  # four versions of every row in the GIN
    small = gin_upkeep(store, PAPERS, PAPERS)  # a small table: the excess is not worth it
    assert small.actions == [] and "a rebuild is worth" in small.notes[0]
    monkeypatch.setattr(maintenance, "UPKEEP_MIN_EXCESS_BYTES", 0)
    before, hashes = index_oids(store), store.chunk_hashes()
    trigram = pg_health.table_health(store.conn, store.names.table).index("gin").name
    upkeep = gin_upkeep(store, PAPERS, PAPERS)
    (action,) = upkeep.actions
    assert upkeep.figures["gin_bloat"] > REINDEX_BLOAT and action.target == trigram
    assert action.done and action.error is None
    assert index_oids(store)[trigram] != before[trigram]
    assert store.chunk_hashes() == hashes
    assert gin_upkeep(store, PAPERS, PAPERS).actions == []  # rebuilt: within bound now


def test_a_trickle_is_left_to_the_weekly_maintenance(make_backend):
    store = churned(make_backend("pgvector"))
    small = gin_upkeep(store, 10, PAPERS)
    assert small.actions == [] and small.figures == {}
    assert small.notes == ["under 2% of the table changed"]
    assert gin_upkeep(make_backend("pgvector"), 10_000, 0).notes == ["no trigram index"]
