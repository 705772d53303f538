"""The phrase index: an exact prefilter of LIKE / ILIKE for any phrase (Unicode, doubled spaces,
words cut at the phrase's ends), built beside serving, used only while valid."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest
from psycopg import sql

from candlefire_pipeline.backends.factory import build_backend, pg_cache_params
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.backends.pg.terms import cold
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8
#: Short common words, case pairs, letters whose lower case is ASCII (Kelvin sign, dotted I),
#: a final-sigma word, a word past MAX_WORD, punctuation glued to words.
WORDS = ("a", "A", "of", "in", "ins", "and", "the", "The", "to", "is", "mutation", "Mutation",
         "motor", "SOD1", "TDP-43", "\u212aelvin", "\u0130ns", "ΑΣ", "οδός", "x" * 40, "role,",
         "(ALS)", "é", "kelvin", "ins")  # fmt: skip


def documents(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(3, 14))
        gaps = rng.choices((" ", " ", " ", " ", "  ", "\n", "-"), k=len(words) - 1)
        out.append(words[0] + "".join(g + w for g, w in zip(gaps, words[1:], strict=True)))
    return out


def phrases(rng: random.Random, docs: list[str], n: int) -> list[str]:
    """Pieces of documents cut anywhere (edge words partial), and word runs that may be absent."""
    out = []
    while len(out) < n:
        doc = rng.choice(docs)
        start = rng.randrange(len(doc))
        piece = doc[start : start + rng.randint(3, 24)]
        out.append(piece if rng.random() < 0.7 else " ".join(rng.choices(WORDS, k=3)))
    return out


def _store(dsn: str, table: str, mode: str, **cache):
    return build_backend(
        "pgvector", dsn, table=table, substring_mode=mode, ann=AnnParams(full_scan_rows=0),
        cache=CacheParams(enabled=False, **cache),
    )  # fmt: skip


@pytest.fixture(scope="module", params=["like", "ilike"])
def phrase_store(request, pg_dsn):
    """A table of random documents with its phrase index built."""
    mode, rng = request.param, random.Random(7)
    docs = documents(rng, 400)
    store = _store(pg_dsn, f"phr_{mode}_{uuid.uuid4().hex[:8]}", mode)
    store.reset()
    chunks = [chunk(f"p{i}", document=d) for i, d in enumerate(docs)]
    store.replace_papers(make_rows(chunks, unit_vectors(len(docs), DIM), dim=DIM))
    assert store.phrase_state() == "absent"
    assert store.build_phrase_index() > 0
    yield store, docs, rng
    store.reset()
    store.close()


def _holders(store, patterns: list[str], phrased: bool) -> list[int]:
    vectors = list(unit_vectors(len(patterns), DIM, seed=3))
    query, params = cold.probe_query(
        store.names, store.substring_mode, patterns, vectors, None, 40, [phrased] * len(patterns)
    )
    with store.plan(cold.PROBE_PLAN):
        return [row[1] for row in store.conn.execute(query, params).fetchall()]


def _scanned(store, patterns: list[str]) -> list[int]:
    """Holders by a plain scan of every row: the operator alone decides."""
    op = "ILIKE" if store.substring_mode == "ilike" else "LIKE"
    table = store.names.ident().as_string(store.conn)
    query = f"SELECT count(*) FROM {table} WHERE document {op} %s ESCAPE '\\'"
    with store.plan({"enable_bitmapscan": "off", "enable_indexscan": "off"}):
        return [store.conn.execute(query, [_like(p)]).fetchone()[0] for p in patterns]


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def test_the_phrase_index_finds_every_holder_of_any_phrase(phrase_store):
    store, docs, rng = phrase_store
    patterns = phrases(rng, docs, 300)
    expected = _scanned(store, patterns)
    assert _holders(store, patterns, phrased=True) == expected
    assert _holders(store, patterns, phrased=False) == expected
    keyed = [p for p in patterns if phrase.python_query_keys(p)]
    assert len(keyed) > 100 and sum(expected) > 300  # the keyed path ran, on real holders


def test_a_phrased_probe_reads_the_phrase_index(phrase_store):
    store = phrase_store[0]
    query, params = cold.probe_query(
        store.names, store.substring_mode, ["in the motor"], list(unit_vectors(1, DIM)), 10, 40,
        [True],
    )  # fmt: skip
    with store.plan(cold.PROBE_PLAN):
        plan = "\n".join(r[0] for r in store.conn.execute(sql.SQL("EXPLAIN ") + query,
                                                              params))  # fmt: skip
    assert phrase.index_name(store.names, store.substring_mode).as_string(store.conn)[1:-1] in plan


def test_grounding_through_either_index_is_the_same(phrase_store):
    store, docs, rng = phrase_store
    patterns = phrases(rng, docs, 120)
    answers = []
    for phrased in (True, False):
        query, params = cold.grounding_query(
            store.names, store.substring_mode, patterns, [phrased] * len(patterns)
        )
        with store.plan(cold.PROBE_PLAN):
            answers.append(store.conn.execute(query, params).fetchall())
    assert answers[0] == answers[1]
    assert sum(w is not None for _, w, _ in answers[0]) > 50


def test_routed_requests_answer_as_the_trigram_index_alone(phrase_store, pg_dsn, monkeypatch):
    store, docs, rng = phrase_store
    variants = phrases(rng, docs, 60)
    vectors = unit_vectors(len(variants), DIM, seed=5)
    routes: list = []
    probe = cold.probe_query
    monkeypatch.setattr(
        cold, "probe_query", lambda *a, **k: routes.extend(a[-1] or ()) or probe(*a, **k)
    )
    routed = store.substring_candidates(variants, vectors, 10)
    grounded = store.ground_terms([[v] for v in variants])
    plain = _store(pg_dsn, store.names.table, store.substring_mode, phrase_index=False)
    try:
        assert plain.phrase_state() == "off" and not plain.phrase_ready()
        assert plain.substring_candidates(variants, vectors, 10) == routed
        assert plain.ground_terms([[v] for v in variants]) == grounded
    finally:
        plain.close()
    assert any(routes)  # the sample sent some variants through the phrase index


@pytest.mark.parametrize(
    ("core", "keys"),
    [
        ("The ins and", ["2|he ins an"]),
        ("A mutation in", ["1|A mutation i"]),  # single-letter ends: one character of context
        ("of the", []),  # no inner word
        (" of the ", []),  # its neighbours are cut words of unknown length
        ("x of  the y", ["1|x of ", "1| the y"]),  # an empty inner word is whole: "" is context
        ("a b c d", ["1|a b c", "1|b c d"]),
        ("ab cd ef gh", ["2|ab cd ef", "2|cd ef gh"]),
        ("a " + "y" * 33 + " b", []),  # longer than MAX_WORD
        ("", []),
    ],
)
def test_query_keys_use_only_what_the_phrase_fixes(core, keys):
    assert phrase.python_query_keys(core) == keys


def test_python_and_sql_query_keys_agree(pg_dsn):
    rng = random.Random(11)
    cores = phrases(rng, documents(rng, 50), 200)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        phrase.ensure_functions(conn)
        for core in cores:
            sql_keys = conn.execute(
                sql.SQL("SELECT {} FROM (SELECT %s::text AS p) x").format(
                    phrase.query_keys("like", sql.SQL("x.p"))
                ),
                [_like(core)],
            ).fetchone()[0]  # fmt: skip
            hashed = [conn.execute("SELECT hashtext(%s)", [k]).fetchone()[0]
                      for k in phrase.python_query_keys(core)]  # fmt: skip
            assert sorted(sql_keys) == sorted(set(hashed)), core


def test_the_index_is_built_once_rebuilt_when_invalid_and_skipped_when_off(pg_dsn, make_backend):
    store = make_backend("pgvector", bulk_rebuild_rows=2)
    assert store.build_phrase_index() is None  # no table yet: nothing to build
    chunks = [chunk(f"p{i}", document=f"the role of motor {i}") for i in range(4)]
    store.replace_papers(make_rows(chunks, unit_vectors(4, DIM), dim=DIM))
    assert store.phrase_state() == "absent" and not store.phrase_ready()
    with psycopg.connect(pg_dsn, autocommit=True) as other:  # another session is building it
        lock = f"candlefire:phrase:{store.names.table}"
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", [lock])
        assert store.build_phrase_index() is None and store.phrase_state() == "absent"
        # released here, not by the close: the server ends a closed session in its own time
        other.execute("SELECT pg_advisory_unlock(hashtext(%s))", [lock])
    assert store.build_phrase_index() > 0
    assert store.build_phrase_index() is None and store.phrase_ready()
    index = phrase.index_name(store.names, "like").as_string(store.conn)
    store.conn.execute(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [index]
    )
    assert store.phrase_state() == "invalid" and not store.phrase_ready()
    assert store.build_phrase_index() > 0 and store.phrase_ready()
    off = build_backend("pgvector", pg_dsn, table=store.names.table,
                        cache=CacheParams(phrase_index=False))  # fmt: skip
    try:
        assert off.build_phrase_index() is None and not off.phrase_ready()
    finally:
        off.close()


def test_a_first_build_drops_the_index_and_the_next_build_restores_it(make_backend):
    store = make_backend("pgvector", bulk_rebuild_rows=2)
    rows = make_rows([chunk(f"p{i}", document=f"a role of {i}") for i in range(3)],
                     unit_vectors(3, DIM), dim=DIM)  # fmt: skip
    store.replace_papers(rows)
    store.build_phrase_index()
    store.delete_papers([f"p{i}" for i in range(3)])
    assert store.phrase_ready()  # deletes keep it
    store.replace_papers(rows)  # into the emptied table: a first build again
    assert store.phrase_state() == "absent"
    assert store.build_phrase_index() > 0 and store.phrase_ready()
    assert store.substring_candidates(["role of 1"], unit_vectors(1, DIM), 5)[0][0]["pmid"] == "p1"


@pytest.mark.parametrize(("value", "on"), [(None, True), ("off", False), ("on", True)])
def test_the_setting_reaches_the_store(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv("CANDLEFIRE_PHRASE_INDEX", raising=False)
    else:
        monkeypatch.setenv("CANDLEFIRE_PHRASE_INDEX", value)
    assert pg_cache_params(Settings.from_env()).phrase_index is on


def test_a_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_PHRASE_INDEX", "sometimes")
    with pytest.raises(ValueError, match="CANDLEFIRE_PHRASE_INDEX"):
        Settings.from_env()
