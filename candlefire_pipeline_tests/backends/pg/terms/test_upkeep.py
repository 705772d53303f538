"""The term cache stays exact as drops land: every kept entry equals a fresh computation after
every write, whatever the sequence of adds, replaces, deletes and churn."""

from __future__ import annotations

import logging
import random

import pytest

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.terms import ahead, upkeep
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline_tests.backends.pg.terms.corpus import NAMES, VARIANTS, Corpus, vectors
from candlefire_pipeline_tests.backends.pg.terms.helpers import differences, kept, valid, warm

N = 4
DEPTH = 6


def answers(store, n: int = N):
    return (
        store.substring_candidates(list(VARIANTS), vectors(VARIANTS), n),
        store.semantic_candidates(vectors(NAMES), n, stage="entities", texts=list(NAMES)),
        store.ground_terms([[v] for v in VARIANTS]),
    )


def drop(corpus: Corpus, store, rng: random.Random) -> str:
    kind = rng.choice(("add", "replace", "delete", "churn", "add+delete"))
    if kind == "add":
        store.replace_papers(corpus.rows(corpus.add(rng.randint(1, 8))))
    elif kind in ("replace", "churn"):
        pmids = corpus.pick(0.2 if kind == "churn" else 0.05)
        corpus.replace(pmids)
        store.replace_papers(corpus.rows(pmids))
    elif kind == "delete":
        pmids = corpus.pick(0.05)
        corpus.delete(pmids)
        store.delete_papers(pmids)
    else:
        added = corpus.add(3)
        gone = [p for p in corpus.pick(0.05) if p not in added]
        corpus.delete(gone)
        store.replace_papers(corpus.rows(added))
        store.delete_papers(gone)
    return kind


@pytest.mark.parametrize(("seed", "mode"), [(1, "like"), (2, "like"), (3, "ilike")])
def test_kept_entries_equal_fresh_ones_after_every_random_drop(make_backend, caplog, seed, mode):
    caplog.set_level(logging.INFO, logger=ahead.__name__)
    rng = random.Random(seed)
    corpus = Corpus(rng)
    store = make_backend("pgvector", substring_mode=mode, cache=CacheParams(depth=DEPTH))
    store.replace_papers(corpus.rows(corpus.add(60)))
    warm(store, N)
    uncached = PgVectorBackend(store._dsn, table=store.names.table, substring_mode=mode,
                               cache=CacheParams(enabled=False))  # fmt: skip
    changed = read_ahead = 0
    try:
        for step in range(12):
            kind = drop(corpus, store, rng)
            changed += store.last_upkeep.changed
            read_ahead += store.upkeep_total.ahead_seconds > 0
            assert differences(store) == [], f"after drop {step} ({kind})"
            assert valid(store)
            assert answers(store) == answers(uncached), f"after drop {step} ({kind})"
    finally:
        uncached.close()
    assert changed > 0  # the drops did touch kept entries
    assert read_ahead > 0  # the writes' upkeep was read beside their COPY ...
    assert "reads inline" not in caplog.text  # ... and never fell back to reading inline
    assert store.terms.stats.hits > 0
    assert len(kept(store)) >= len(VARIANTS) + len(NAMES)


def test_a_failed_read_ahead_is_read_inline_and_stays_exact(make_backend, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=ahead.__name__)
    corpus = Corpus(random.Random(7))
    store = make_backend("pgvector", cache=CacheParams(depth=DEPTH))
    store.replace_papers(corpus.rows(corpus.add(40)))
    warm(store, N)

    def refused(dsn):
        raise BackendUnavailableError("too many connections for role (test)")

    monkeypatch.setattr(ahead, "connect", refused)
    pmids = corpus.pick(0.3)
    corpus.replace(pmids)
    store.replace_papers(corpus.rows(pmids + corpus.add(5)))
    assert store.last_upkeep.changed > 0 and not store.last_upkeep.cleared
    assert "reads inline: the read ahead failed (BackendUnavailableError: too many" in caplog.text
    assert differences(store) == [] and valid(store)


def test_a_write_that_cleared_the_cache_does_not_read_ahead(make_backend):
    corpus = Corpus(random.Random(8))
    store = make_backend("pgvector", cache=CacheParams(depth=DEPTH))
    store.replace_papers(corpus.rows(corpus.add(40)))
    warm(store, N)
    # a write that bypasses the store: the next store write clears the cache in its transaction
    store.conn.execute(f"UPDATE {store.names.table} SET year = year")
    assert not valid(store)
    store.replace_papers(corpus.rows(corpus.add(5)))
    assert store.last_upkeep.cleared and store.last_upkeep.ahead_seconds == 0
    assert kept(store) == [] and valid(store)
    warm(store, N)
    assert differences(store) == []


def test_exact_distances_sent_in_blocks_keep_the_cache_exact(make_backend, monkeypatch):
    monkeypatch.setattr(upkeep, "DISTANCE_ROWS", 3)  # every drop's new rows in many statements
    rng = random.Random(9)
    corpus = Corpus(rng)
    store = make_backend("pgvector", cache=CacheParams(depth=DEPTH))
    store.replace_papers(corpus.rows(corpus.add(50)))
    warm(store, N)
    for step in range(4):
        pmids = corpus.pick(0.3)
        corpus.replace(pmids)
        store.replace_papers(corpus.rows(pmids + corpus.add(4)))
        assert store.last_upkeep.changed > 0 and not store.last_upkeep.cleared, f"drop {step}"
        assert differences(store) == [] and valid(store), f"after drop {step}"


def test_a_write_reads_ahead_only_when_the_cache_holds_entries(make_backend):
    corpus = Corpus(random.Random(10))
    store = make_backend("pgvector", cache=CacheParams(depth=DEPTH))
    store.replace_papers(corpus.rows(corpus.add(30)))
    store.replace_papers(corpus.rows(corpus.add(5)))
    assert kept(store) == [] and store.last_upkeep.ahead_seconds == 0  # no connection opened
    warm(store, N)
    store.replace_papers(corpus.rows(corpus.add(5)))
    assert store.last_upkeep.ahead_seconds > 0
    assert differences(store) == [] and valid(store)
