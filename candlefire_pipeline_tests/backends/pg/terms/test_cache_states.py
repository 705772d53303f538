"""The term cache's states besides the happy path: a write that bypasses it, an upkeep that
fails, a reader that may not write, a writer holding the lock, the bound, a reset, a first
build, and the keyword walk for a variant held by many chunks."""

from __future__ import annotations

import logging
import random

import psycopg
import pytest
from psycopg import sql

from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline.backends.pg.terms import compute, schema, upkeep
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline_tests.backends.pg.terms.corpus import NAMES, VARIANTS, Corpus, vectors
from candlefire_pipeline_tests.backends.pg.terms.helpers import (
    differences,
    fresh_list,
    kept,
    valid,
    warm,
)

N = 4


@pytest.fixture
def corpus() -> Corpus:
    return Corpus(random.Random(7))


@pytest.fixture
def store(make_backend, corpus):
    store = make_backend("pgvector", cache=CacheParams(depth=6))
    store.replace_papers(corpus.rows(corpus.add(50)))
    return store


def keywords(store, n: int = N):
    return store.substring_candidates(list(VARIANTS), vectors(VARIANTS), n)


def test_a_cold_answer_is_kept_and_the_next_one_is_a_lookup(store):
    cold = keywords(store)
    misses = store.terms.stats.misses
    assert misses == len(VARIANTS) and store.terms.stats.kept == len(VARIANTS)
    assert keywords(store) == cold
    assert store.terms.stats.misses == misses and store.terms.stats.hits == len(VARIANTS)


def test_a_write_that_bypasses_the_store_disables_the_cache_until_the_next_write(
    store, corpus, caplog
):
    warm(store, N)
    gone = sorted(corpus.papers)[:5]
    store.conn.execute(
        sql.SQL("DELETE FROM {t} WHERE pmid = ANY(%s)").format(t=store.names.ident()), [gone]
    )
    corpus.delete(gone)
    assert not valid(store)
    hits = store.terms.stats.hits
    uncached = PgVectorBackend(store._dsn, table=store.names.table,
                               cache=CacheParams(enabled=False))  # fmt: skip
    try:
        assert keywords(store) == keywords(uncached)  # exact, not from the stale entries
        assert store.terms.stats.hits == hits and store.terms.stats.not_kept > 0
        with caplog.at_level(logging.WARNING):
            store.replace_papers(corpus.rows(corpus.add(2)))
        assert "written without keeping the cache" in caplog.text
        assert store.last_upkeep.cleared and valid(store) and kept(store) == []
        keywords(store)
        assert len(kept(store)) == len(VARIANTS) and differences(store) == []
    finally:
        uncached.close()


def test_a_failed_upkeep_clears_the_cache_and_the_write_lands(store, corpus, monkeypatch, caplog):
    warm(store, N)

    def broken(*args):
        raise psycopg.errors.DiskFull("no space left for the cache")

    monkeypatch.setattr(upkeep, "_maintain", broken)
    added = corpus.add(3)
    with caplog.at_level(logging.ERROR):
        store.replace_papers(corpus.rows(added))
    assert all(store.has_paper(p) for p in added)
    assert "upkeep failed" in store.last_upkeep.cleared and "cleared" in caplog.text
    assert kept(store) == [] and valid(store)


def test_a_reader_without_write_grants_answers_exactly_and_keeps_nothing(store, caplog):
    warm(store, N)  # the owner made the entries
    store.conn.execute(sql.SQL("DELETE FROM {e}").format(e=schema.terms_table(store.names)))
    role_dsn = _reader_dsn(store, "cache_reader_no_grant", grant_cache=False)
    reader = PgVectorBackend(role_dsn, table=store.names.table, cache=CacheParams(depth=6))
    try:
        with caplog.at_level(logging.WARNING):
            first = keywords(reader)
            again = keywords(reader)
        assert first == again == keywords(store)
        assert reader.terms.stats.kept == 0 and reader.terms.stats.not_kept > 0
        assert caplog.text.count("cannot keep answers") == 1
    finally:
        reader.close()


def test_the_serving_role_keeps_answers_in_the_cache_only(store):
    role_dsn = _reader_dsn(store, "cache_reader", grant_cache=True)
    reader = PgVectorBackend(role_dsn, table=store.names.table, cache=CacheParams(depth=6))
    try:
        keywords(reader)
        assert reader.terms.stats.kept == len(VARIANTS) and differences(store) == []
        reader.terms.flush()
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.conn.execute(sql.SQL("DELETE FROM {t}").format(t=store.names.ident()))
    finally:
        reader.close()


def _reader_dsn(store, role: str, grant_cache: bool) -> str:
    from psycopg.conninfo import make_conninfo

    ensure_reader_role(store._dsn, role, "secret", store.names.table)
    if not grant_cache:
        store.conn.execute(
            sql.SQL("REVOKE INSERT, UPDATE, DELETE ON {e} FROM {r}").format(
                e=schema.terms_table(store.names), r=sql.Identifier(role)
            )
        )
    return make_conninfo(store._dsn, user=role, password="secret")


def test_an_answer_computed_while_a_writer_holds_the_lock_is_served_but_not_kept(store):
    with psycopg.connect(store._dsn, autocommit=True) as writer, writer.transaction():
        writer.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [store.names.lock_key])
        first = keywords(store)
        assert store.terms.stats.kept == 0 and kept(store) == []
    assert keywords(store) == first and len(kept(store)) == len(VARIANTS)


def test_the_cache_is_bounded_by_its_least_recently_used_entries(make_backend, corpus, caplog):
    store = make_backend("pgvector", cache=CacheParams(depth=6, max_entries=5))
    store.replace_papers(corpus.rows(corpus.add(20)))
    with caplog.at_level(logging.INFO):
        for variant in VARIANTS:
            store.substring_candidates([variant], vectors([variant]), N)
    assert len(kept(store)) <= 5 and "evicted" in caplog.text
    assert kept(store)[-1]["text"] == VARIANTS[-1]  # the newest stays


def test_a_reset_drops_the_cache_and_a_first_build_starts_it_empty(make_backend, corpus):
    store = make_backend("pgvector", bulk_rebuild_rows=10, cache=CacheParams(depth=6))
    store.replace_papers(corpus.rows(corpus.add(30)))
    warm(store, N)
    assert kept(store)
    store.reset()
    assert not schema.exists(store.conn, store.names)
    store.replace_papers(corpus.rows(sorted(corpus.papers)))  # a first build into the empty table
    assert kept(store) == [] and valid(store)
    warm(store, N)
    assert differences(store) == []


def test_grounding_entries_gain_a_list_and_keep_their_facts(store):
    facts = store.ground_terms([[v] for v in VARIANTS])
    assert all(not e["listed"] for e in kept(store))
    keywords(store)
    entries = kept(store)
    assert len(entries) == len(VARIANTS) and all(e["listed"] for e in entries)
    assert store.ground_terms([[v] for v in VARIANTS]) == facts
    assert store.terms.stats.by_kind["keyword"][0] >= len(VARIANTS)
    assert differences(store) == []


@pytest.mark.parametrize("walk", ["auto", "off"])
def test_a_variant_held_by_many_chunks_is_walked_with_its_substring_as_filter(
    make_backend, corpus, walk
):
    store = make_backend("pgvector", ann=AnnParams(full_scan_rows=0),
                         cache=CacheParams(depth=6, keyword_walk=walk))  # fmt: skip
    store.replace_papers(corpus.rows(corpus.add(300)))
    store.conn.execute(sql.SQL("ANALYZE {t}").format(t=store.names.ident()))
    store.substring_candidates(["motor"], vectors(["motor"]), N)
    (entry,) = kept(store)
    assert entry["approximate"] is (walk == "auto")
    ids, _ = fresh_list(store, {**entry, "approximate": False})
    assert len(set(entry["ids"]) & set(ids)) >= len(ids) - 1  # recall, not identity
    if walk == "off":
        assert differences(store) == []


def test_texts_must_come_one_per_vector(store):
    with pytest.raises(ValueError, match="one per query vector"):
        store.semantic_candidates(vectors(NAMES), N, stage="entities", texts=list(NAMES[:2]))


def fillfactor(store) -> str | None:
    options = store.conn.execute(
        "SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)",
        [schema.terms_table(store.names).as_string(store.conn)],
    ).fetchone()[0]
    return next((o for o in options or [] if o.startswith("fillfactor=")), None)


def test_a_write_upgrades_the_cache_earlier_versions_built_and_stays_exact(store, corpus):
    warm(store, N)
    assert fillfactor(store) == f"fillfactor={schema.FILLFACTOR}"  # a new cache has it
    terms = schema.terms_table(store.names)
    index = store.names.ident("_terms_members")
    store.conn.execute(
        sql.SQL(
            "CREATE INDEX {i} ON {e} USING gin ((ids || ARRAY[coalesce(witness, ''), "
            "coalesce(abstract_witness, '')]))"
        ).format(i=index, e=terms)
    )
    store.conn.execute(sql.SQL("ALTER TABLE {e} RESET (fillfactor)").format(e=terms))
    present = "SELECT to_regclass(%s) IS NOT NULL"
    assert store.conn.execute(present, [index.as_string(store.conn)]).fetchone()[0]
    assert fillfactor(store) is None
    pmids = sorted(corpus.papers)[:4]
    corpus.replace(pmids)
    store.replace_papers(corpus.rows(pmids))
    assert not store.conn.execute(present, [index.as_string(store.conn)]).fetchone()[0]
    assert fillfactor(store) == f"fillfactor={schema.FILLFACTOR}"
    assert store.last_upkeep.changed > 0 and differences(store) == [] and valid(store)
    assert store.last_upkeep.ahead_seconds == 0  # its own DDL: the upkeep read inline


def test_a_variant_the_sample_shows_frequent_is_walked_without_a_probe(
    make_backend, corpus, monkeypatch
):
    store = make_backend("pgvector", ann=AnnParams(full_scan_rows=0), cache=CacheParams(depth=6))
    store.replace_papers(corpus.rows(corpus.add(300)))
    store.conn.execute(sql.SQL("ANALYZE {t}").format(t=store.names.ident()))
    probed = []
    probe = compute._probe
    monkeypatch.setattr(compute, "_probe", lambda s, e, idx, *a: probed.extend(idx) or probe(
        s, e, idx, *a))  # fmt: skip
    store.substring_candidates(["motor"], vectors(["motor"]), N)
    (entry,) = kept(store)
    assert probed == [] and entry["approximate"]
    holds = sql.SQL("SELECT document LIKE '%%motor%%', chunk_index FROM {t} WHERE chunk_id = %s")
    for witness, abstract in ((entry["witness"], False), (entry["abstract_witness"], True)):
        if witness is not None:  # a walked row holds the variant; an abstract one is chunk 0
            held, index = store.conn.execute(holds.format(t=store.names.ident()),
                                             [witness]).fetchone()  # fmt: skip
            assert held and (index == 0 or not abstract)
    uncached = PgVectorBackend(store._dsn, table=store.names.table,
                               cache=CacheParams(enabled=False))  # fmt: skip
    try:
        assert store.ground_terms([["motor"]]) == uncached.ground_terms([["motor"]])
    finally:
        uncached.close()
