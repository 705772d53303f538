"""candle-fire's per-term calls answered from the term cache (app/pg_terms.py): the same answers
as the SQL path, served from kept entries once warm, and still Chroma's answers after drops that
add a holder, delete one and replace a paper, after a count() and across a rollback."""

from __future__ import annotations

from dataclasses import replace

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings

from benchmarks.app import search_path as app
from candlefire_pipeline.app import pg_terms
from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.terms import audit
from candlefire_pipeline.operations.serving.state import PINNED
from candlefire_pipeline_tests.app.conftest import mode_settings
from candlefire_pipeline_tests.app.corpus import (
    ENTITIES,
    TWIN_TEXT,
    WORDS,
    SeededEmbedder,
    changing_deployment,
    deploy,
    promote_directly,
)
from candlefire_pipeline_tests.app.differential import Tally, same_answer
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

#: Requests of candle-fire's search path: a text, entity names, keyword terms.
REQUESTS = [
    (TWIN_TEXT, ["SOD1", "riluzole"], ["TDP-43", "SPG302"]),
    ("motor neuron survival in mice", ["C9orf72", "FUS"], ["G93A", "ALSFRS-R", "x_y%z"]),
    ("edaravone trial cohort", list(ENTITIES), ["SPG 302", "NfL", "Größe", "absent-term-42"]),
]
ROWS = ["documents", "metadatas", "distances"]


def answers(collection) -> list:
    return [app.answer(collection, text, entities, terms) for text, entities, terms in REQUESTS]


def uncached(settings):
    return replace(settings, term_cache=replace(settings.term_cache, enabled=False))


@pytest.mark.parametrize("mode", ["pgvector-exact", "pgvector-hnsw"])
def test_kept_entries_answer_as_the_sql_path_does(app_deployment, mode):
    settings = mode_settings(app_deployment.settings, mode)
    with ServingCollection(uncached(settings), SeededEmbedder()) as computed:
        expected = answers(computed)
        assert computed.answered == {"sql": computed.answered["sql"]}  # the cache is off
    with ServingCollection(settings, SeededEmbedder()) as cached:
        first, warm_from = answers(cached), cached.answered
        second = answers(cached)
        after = cached.answered
    assert first == expected and second == expected
    # the second pass reads kept entries: only the semantic query and the paper gets remain SQL
    kept = after.get("kept", 0) - warm_from.get("kept", 0)
    sql = after.get("sql", 0) - warm_from.get("sql", 0)
    assert kept > 3 * sql and after.get("kept after computing", 0) == warm_from.get(
        "kept after computing", 0
    )


@pytest.fixture
def changing(tmp_path, pg_dsn):
    """A small deployment of its own (this test writes to it) and its real Chroma collection."""
    with changing_deployment(tmp_path, pg_dsn, seed=11) as made:
        yield made


def _calls(variants: list[str]) -> list[tuple[str, dict]]:
    calls = [("count", {})]
    for v in variants:
        calls += [
            ("query", {"query_texts": [v], "n_results": 10, "include": ROWS,
                       "where_document": {"$contains": v}}),
            ("query", {"query_texts": [v], "n_results": 1, "include": ["metadatas"],
                       "where_document": {"$contains": v}}),
            ("get", {"where": {"chunk_index": {"$eq": 0}}, "where_document": {"$contains": v},
                     "limit": 1, "include": ["metadatas"]}),
            ("query", {"query_texts": [v], "n_results": 10, "include": ROWS}),
        ]  # fmt: skip
    return calls


def _compare(collection, chroma, embedder, calls, tally: Tally, where: str) -> None:
    for kind, kwargs in calls:
        got = getattr(collection, kind)(**kwargs)
        if kind == "count":
            assert got == chroma.count(), f"{where}: count"
            continue
        asked = dict(kwargs)
        if kind == "query":
            asked["query_embeddings"] = embedder.embed(asked.pop("query_texts"))
        expected = getattr(chroma, kind)(**asked)
        same_answer(expected, got, kind, tally, f"{where}: {kind} {kwargs}")


def _write(settings, embedder, chunks=None, deleted=None) -> None:
    for name in ("chroma", "pgvector"):
        with opened_backend(name, settings) as store:
            if chunks:
                vectors = embedder.embed([c["document"] for c in chunks])
                store.replace_papers(
                    make_rows(
                        chunks, np.asarray(vectors), model_id=embedder.model_id, dim=embedder.dim
                    )
                )
            if deleted:
                store.delete_papers(deleted)


def _holders(chroma, variant: str) -> list[dict]:
    return chroma.get(where_document={"$contains": variant}, include=["metadatas"])["metadatas"]


def test_drops_between_calls_keep_every_answer_chromas(changing):
    deployment, chroma = changing
    settings, embedder = deployment.settings, SeededEmbedder()
    variants = ["SOD1", "riluzole", "TDP-43", "ALS", "Größe", "never-held"]
    tally = Tally()
    with ServingCollection(settings, embedder) as collection:
        _compare(collection, chroma, embedder, _calls(variants), tally, "before")
        _compare(collection, chroma, embedder, _calls(variants), tally, "warm")
        kept_before = collection.answered.get("kept", 0)
        # a new paper holding SOD1 (an abstract), so a new holder and abstract holder
        _write(settings, embedder, [chunk("90001", document="SOD1 new holder riluzole",
                                          paper_hash="p-90001")])  # fmt: skip
        _compare(collection, chroma, embedder, _calls(variants), tally, "holder added")
        # delete every paper holding riluzole but one; replace a TDP-43 holder's text
        riluzole = sorted({m["pmid"] for m in _holders(chroma, "riluzole")})
        _write(settings, embedder, deleted=riluzole[1:])
        _compare(collection, chroma, embedder, _calls(variants), tally, "holders deleted")
        tdp = _holders(chroma, "TDP-43")[0]
        _write(settings, embedder, [chunk(tdp["pmid"], document="now about FUS only",
                                          paper_hash="p-replaced")])  # fmt: skip
        _compare(collection, chroma, embedder, _calls(variants), tally, "paper replaced")
        # the writes kept the entries exact: read from them, not computed again
        assert collection.answered["kept"] > kept_before + 3 * len(variants)
    assert tally.nonempty > 20


def test_a_rollback_between_two_calls_moves_the_next_call(changing):
    deployment, chroma = changing
    settings, embedder = deployment.settings, SeededEmbedder()
    call = {"query_texts": ["SOD1"], "n_results": 5, "include": ROWS,
            "where_document": {"$contains": "SOD1"}}  # fmt: skip
    tally = Tally()
    with ServingCollection(settings, embedder) as collection:
        _compare(collection, chroma, embedder, [("query", call)], tally, "pgvector")
        assert collection.target.backend == "pgvector"
        promote_directly(settings, PINNED)  # `candlefire rollback` between two calls
        _compare(collection, chroma, embedder, [("query", call), ("count", {})], tally, "rolled")
        assert collection.target.backend == "chroma" and collection.answered == {}
        promote_directly(settings)
        _compare(collection, chroma, embedder, [("query", call)], tally, "promoted again")
        assert collection.target.backend == "pgvector"


def test_a_tie_at_the_cut_is_answered_in_insertion_order(changing):
    """TWIN_TEXT repeats word for word: equal distances. Twins written last with the smallest
    ids make the entries' order (distance, id) differ from the collection's (distance, insertion
    order), and a cut at every n falls inside the tie."""
    deployment, _ = changing
    settings, embedder = deployment.settings, SeededEmbedder()
    twins = [chunk(pmid, document=TWIN_TEXT, paper_hash=f"p-{pmid}") for pmid in ("00001", "00002")]
    _write(settings, embedder, twins)
    with (ServingCollection(uncached(settings), SeededEmbedder()) as computed,
          ServingCollection(settings, SeededEmbedder()) as cached):  # fmt: skip
        for text, where_document in ((TWIN_TEXT, None), ("riluzole", {"$contains": "riluzole"})):
            for n in (1, 2, 3, 5, 8):
                call = {"query_texts": [text], "n_results": n, "include": ROWS,
                        "where_document": where_document}  # fmt: skip
                for _ in range(2):  # computed and kept, then read
                    assert cached.query(**call) == computed.query(**call), (text, n)
        assert cached.answered["kept"] > 0


@pytest.mark.parametrize("walked_rows", [pg_terms.WALKED_ROWS, 1])
def test_every_word_grounds_in_an_abstract_as_the_sql_path_does(app_deployment, monkeypatch,
                                                                walked_rows):  # fmt: skip
    """Every word of the corpus, rare (a list holding every holder) or common (held by more
    chunks than an entry keeps: walked along the seq index; walking 1 row, collected)."""
    monkeypatch.setattr(pg_terms, "WALKED_ROWS", walked_rows)
    settings = app_deployment.settings
    with opened_backend("pgvector", settings) as store:  # each parameter walks from cold
        store.clear_term_cache("this test walks for every word")
    calls = [{"where": {"chunk_index": {"$eq": 0}}, "where_document": {"$contains": word},
              "limit": 1, "include": ["metadatas", "documents"]}
             for word in (*WORDS, "absent-word-7", "motor neuron")]  # fmt: skip
    with (ServingCollection(uncached(settings), SeededEmbedder()) as computed,
          ServingCollection(settings, SeededEmbedder()) as cached):  # fmt: skip
        expected = [computed.get(**call) for call in calls]
        assert [cached.get(**call) for call in calls] == expected
        walked = _walks(cached.answered)
        # walked for once; then its first abstract holder is read from the entry
        assert [cached.get(**call) for call in calls] == expected
        answered = cached.answered
    assert walked and _walks(answered) == walked and answered.get("kept", 0) >= len(calls)
    assert answered.get("sql", 0) == 0


def _walks(answered: dict[str, int]) -> int:
    return sum(n for how, n in answered.items() if how.endswith("walked"))


def test_count_is_read_again_after_any_write_even_one_that_bypassed_the_store(changing):
    deployment, chroma = changing
    settings = deployment.settings
    with ServingCollection(settings, SeededEmbedder()) as collection:
        first = collection.count()
        assert first == chroma.count() == collection.count()  # the second from the kept count
        with opened_backend("pgvector", settings) as store:  # a manual DELETE, not the store's
            gone = store.conn.execute(
                f"DELETE FROM {store.names.table} WHERE chunk_id IN (SELECT chunk_id FROM "
                f"{store.names.table} ORDER BY seq LIMIT 3)"
            ).rowcount
        assert gone == 3 and collection.count() == first - 3
        _write(settings, SeededEmbedder(), [chunk("90009", paper_hash="p-90009")])
        assert collection.count() == first - 2


def test_an_unchanged_version_is_not_counted_again(changing):
    """The count is inside the statement that reads the version, and runs only when it moved."""
    from candlefire_pipeline.app.pg_store import _count_statements

    settings = changing[0].settings
    with opened_backend("pgvector", settings) as store:
        statement = _count_statements(store.names)["counted"]
        version = store.conn.execute(
            f"SELECT content_version FROM {store.names.table}_meta"
        ).fetchone()[0]
        plans = {
            known: "\n".join(r[0] for r in store.conn.execute(b"EXPLAIN ANALYZE " + statement,
                                                              [known]).fetchall())
            for known in (version, version - 1)
        }  # fmt: skip
    assert "never executed" in plans[version] and "never executed" not in plans[version - 1]


def _abstract_call(variant: str) -> tuple[str, dict]:
    return ("get", {"where": {"chunk_index": {"$eq": 0}}, "where_document": {"$contains": variant},
                    "limit": 1, "include": ["metadatas", "documents"]})  # fmt: skip


def _common_word_not_in(chroma, document: str, depth: int) -> str:
    """A word held by more chunks than an entry keeps (so it is walked for), absent from this
    document."""
    counts = {w: len(_holders(chroma, w)) for w in WORDS if w not in document}
    word = max(counts, key=counts.get)
    assert counts[word] > depth, counts
    return word


def test_a_kept_first_abstract_holder_follows_every_write_as_chromas_get_does(tmp_path, pg_dsn):
    """Walked for once, then read from the entry; a new holder, an earlier abstract rewritten in
    place to hold the word (it keeps its place in insertion order) and the first holder's
    deletion each leave Chroma's answer, and the kept entry passes the audit."""
    deployment = deploy(tmp_path, pg_dsn, seed=5, papers=120)
    settings, embedder = deployment.settings, SeededEmbedder()
    settings = replace(settings, term_cache=replace(settings.term_cache, depth=18))
    client = chromadb.PersistentClient(
        str(settings.chroma_path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    chroma = client.get_collection(settings.chroma_collection, embedding_function=None)
    first = chroma.get(
        where={"chunk_index": {"$eq": 0}}, limit=1, include=["documents", "metadatas"]
    )
    earliest, document = first["metadatas"][0], first["documents"][0]
    word = _common_word_not_in(chroma, document, settings.term_cache.depth)
    call, tally = [_abstract_call(word)], Tally()
    try:
        with ServingCollection(settings, embedder) as collection:
            _compare(collection, chroma, embedder, call * 3, tally, "warm")
            assert collection.answered == {"kept after computing, walked": 1, "kept": 2}
            _write(settings, embedder, [chunk("90001", document=f"new {word}",
                                              paper_hash="p-90001")])  # fmt: skip
            _compare(collection, chroma, embedder, call, tally, "a new holder")
            assert collection.answered["kept"] == 3  # a new row never precedes the first
            rewritten = chunk(earliest["pmid"], 0, has_full_text=earliest["has_full_text"],
                              document=f"now {word}", paper_hash="p-rewritten")  # fmt: skip
            _write(settings, embedder, [rewritten])
            _compare(collection, chroma, embedder, call, tally, "an earlier abstract rewritten")
            _write(settings, embedder, deleted=[earliest["pmid"]])
            _compare(collection, chroma, embedder, call * 2, tally, "the first holder deleted")
            walks = collection.answered["kept, walked"]
            assert walks == 2, collection.answered  # the rewrite and the deletion: walked again
        with opened_backend("pgvector", settings) as store:
            report = audit.audit(store)
            assert report.exact, report.differences
            kept = [e for e in audit.entries(store.conn, store.names) if e["text"] == word]
            assert [e["abstract_first"] for e in kept] != [None]
    finally:
        client.close()
        with opened_backend("pgvector", deployment.settings) as store:
            store.reset()
    assert tally.nonempty >= 6


def test_a_computed_keyword_list_names_the_first_abstract_holder(changing):
    """The keyword call ranks every holder, so it also names the first abstract holder in
    insertion order: the grounding-in-an-abstract get that follows never walks, and an earlier
    abstract rewritten to hold the word (its old place kept) still moves Chroma's answer."""
    deployment, chroma = changing
    depth = 18  # the least an entry keeps: a common word is held by more
    settings = replace(
        deployment.settings, term_cache=replace(deployment.settings.term_cache, depth=depth)
    )
    embedder, tally = SeededEmbedder(), Tally()
    first = chroma.get(where={"chunk_index": {"$eq": 0}}, limit=1,
                       include=["documents", "metadatas"])  # fmt: skip
    earliest = first["metadatas"][0]
    word = _common_word_not_in(chroma, first["documents"][0], depth)
    keyword = ("query", {"query_texts": [word], "n_results": 10, "include": ROWS,
                         "where_document": {"$contains": word}})  # fmt: skip
    with ServingCollection(settings, embedder) as collection:
        _compare(collection, chroma, embedder, [keyword, _abstract_call(word)], tally, "cold")
        assert collection.answered == {"kept after computing": 1, "kept": 1}  # no walk
        rewritten = chunk(earliest["pmid"], 0, has_full_text=earliest["has_full_text"],
                          document=f"now {word}", paper_hash="p-rewritten")  # fmt: skip
        _write(settings, embedder, [rewritten])
        _compare(collection, chroma, embedder, [_abstract_call(word)], tally, "rewritten")
        assert collection.get(**_abstract_call(word)[1])["ids"] == [rewritten["chunk_id"]]
    with opened_backend("pgvector", settings) as store:
        report = audit.audit(store)
    assert report.exact, report.differences
    assert tally.nonempty >= 3
