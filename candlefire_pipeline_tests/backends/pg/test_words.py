"""The word index: the Python and SQL word functions agree, a phrase's inner words are whole
words of every document holding it, and a probe through the word index finds every holder."""

from __future__ import annotations

import logging
import random

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.backends.pg import words
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.health import table_health
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline.backends.pg.terms import compute, sample
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline.backends.pg.terms.sample import DocumentSample
from candlefire_pipeline.backends.pg.words import document_words, inner_words
from candlefire_pipeline.operations.maintenance import pgvector_health
from candlefire_pipeline_tests.backends.pg.terms.corpus import Corpus, vectors

TRICKY = [
    "The essence of ALS",
    "SOD1G93A mice; TDP-43 (C9orf72) and FUS/TLS",
    "naïve neurons, café-au-lait spots and Straße",
    "x" * 70 + " tail words here",
    "",
    "UPPER lower MiXeD",
    "über-cool résumé naïveté",
    "p<0.05 <i>riluzole</i> http://example.org/path_name?x=motor",
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The essence of", ["essence"]),
        ("essence", []),  # no run bounded on both sides
        ("in the motor neurons of", ["motor", "neurons"]),
        ("SOD1 mutant mice", ["mutant"]),
        ("C9orf72 repeat", []),  # both runs touch an end, "orf" is short
        ("x naïve y", []),  # "na" and "ve": too short, and a non-ASCII letter splits them
        ("of Motor-neuron disease", ["motor", "neuron"]),
        ("a " + "y" * 65 + " b", []),  # longer than MAX_LENGTH: never indexed
        ("", []),
    ],
)
def test_inner_words_are_bounded_runs_of_ascii_letters(text, expected):
    assert inner_words(text) == expected


@pytest.mark.parametrize("document", TRICKY)
def test_python_and_sql_words_agree(pg_conn, document):
    words.ensure_function(pg_conn)
    query = f"SELECT {words.FUNCTION}(%s)"
    assert set(pg_conn.execute(query, [document]).fetchone()[0]) == document_words(document)


def test_every_holder_holds_the_inner_words(pg_conn):
    """The superset property the index rests on, over phrases cut from real-looking text at
    random offsets (so they start and end inside words)."""
    rng = random.Random(7)
    text = " ".join(TRICKY) * 3
    for _ in range(300):
        start = rng.randrange(len(text))
        phrase = text[start : start + rng.randint(3, 30)]
        for document in TRICKY + [text]:
            if phrase in document:
                assert set(inner_words(phrase)) <= document_words(document), (phrase, document)


def test_ensure_function_is_idempotent(pg_conn):
    for _ in range(2):
        words.ensure_function(pg_conn)
    signature = f"{words.FUNCTION}(text)"
    assert pg_conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", [signature]).fetchone()[0]


PHRASES = ("motor neuron axon", "patient trial", " spinal ", "of stress granule in",
           "SOD1 mouse", "x muscle y", "axon synapse mouse protein", "Motor motor",
           "neuron ZZ999 axon")  # fmt: skip


@pytest.fixture
def pg_conn(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def store(make_backend):
    corpus = Corpus(random.Random(11))
    store = make_backend("pgvector", cache=CacheParams(depth=6))
    store.replace_papers(corpus.rows(corpus.add(120)))
    store.conn.execute(f"ANALYZE {store.names.table}")
    return store


def probed(store, monkeypatch, share: float) -> list:
    monkeypatch.setattr(sample, "WORD_SHARE", share)
    store.document_sample = DocumentSample()
    return compute.keyword_entries(store, 40, False, list(PHRASES), vectors(PHRASES), 6)


def test_a_probe_through_the_word_index_finds_what_the_trigrams_find(store, monkeypatch):
    assert words.has_index(store.conn, store.names)
    by_trigrams = probed(store, monkeypatch, -1.0)  # no variant routed to the word index
    by_words = probed(store, monkeypatch, 1.0)  # every variant with inner words
    routed = store.document_sample.word_filters(
        store.conn, store.names, "like", list(PHRASES), store.row_estimate()
    )
    assert sum(r is not None for r in routed) >= 5
    assert by_words == by_trigrams
    assert any(e.ids for e in by_words) and any(not e.ids for e in by_words)


def test_ilike_and_a_table_without_the_index_keep_the_trigrams(store, monkeypatch):
    monkeypatch.setattr(sample, "WORD_SHARE", 1.0)
    rows = store.row_estimate()
    ilike = DocumentSample().word_filters(store.conn, store.names, "ilike", list(PHRASES), rows)
    assert ilike == [None] * len(PHRASES)
    store.conn.execute(f"DROP INDEX {store.names.words.as_string(store.conn)}")
    like = DocumentSample().word_filters(store.conn, store.names, "like", list(PHRASES), rows)
    assert like == [None] * len(PHRASES)


def test_a_table_built_before_the_word_index_gets_it_at_the_next_write(store, caplog):
    store.conn.execute(f"DROP INDEX {store.names.words.as_string(store.conn)}")
    with caplog.at_level(logging.INFO):
        store.ensure_schema(*store.stored_model())
    assert words.has_index(store.conn, store.names)
    assert "built the word index" in caplog.text


def test_health_tells_the_word_index_from_the_trigram_index(store):
    health = table_health(store.conn, store.names.table)
    assert health.index("gin").name.endswith("_document_trgm")
    assert health.index("word_gin").name.endswith("_document_words")
    figures = pgvector_health(store).figures
    assert figures["gin_bytes"] == health.index("gin").bytes
    assert figures["word_gin_bytes"] == health.index("word_gin").bytes


def test_the_read_only_serving_role_probes_through_the_word_index(store, monkeypatch):
    ensure_reader_role(store._dsn, "words_reader", "secret", store.names.table)
    dsn = make_conninfo(store._dsn, user="words_reader", password="secret")
    reader = PgVectorBackend(dsn, table=store.names.table, cache=CacheParams(depth=6))
    try:
        assert probed(reader, monkeypatch, 1.0) == probed(store, monkeypatch, -1.0)
    finally:
        reader.close()
