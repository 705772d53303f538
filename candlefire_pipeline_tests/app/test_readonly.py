"""The serving collection only reads: it answers as the read-only serving role (backends/pg/roles),
refuses every write call by name on either store without touching it, answers an empty store
as an empty Chroma collection does, and refuses a table it cannot answer from, saying why."""

from __future__ import annotations

import uuid
from dataclasses import replace

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo

from candlefire_pipeline.app import ReadOnlyCollectionError, open_collection
from candlefire_pipeline.app.collection import WRITE_CALLS, ServingCollection
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg.roles import ensure_reader_role
from candlefire_pipeline_tests.app.calls_random import call_app
from candlefire_pipeline_tests.app.conftest import mode_settings
from candlefire_pipeline_tests.app.corpus import SeededEmbedder, promote_directly
from candlefire_pipeline_tests.app.differential import Tally, same_answer

CALLS = [
    ("count", {}),
    ("get", {"where": {"pmid": {"$in": ["10001", "10002", "10003"]}}}),
    ("get", {"where_document": {"$contains": "ALS"}, "limit": 4, "include": ["embeddings"]}),
    ("query", {"query_texts": ["riluzole", "SPG302"], "n_results": 6,
               "where": {"year": {"$gte": 2000}}}),
    ("query", {"query_texts": ["motor neuron"], "where_document": {"$contains": "100%"}}),
]  # fmt: skip


@pytest.fixture
def reader_dsn(pg_dsn, app_deployment):
    role = f"cf_app_{uuid.uuid4().hex[:10]}"
    ensure_reader_role(pg_dsn, role, "s3cret-app", table=app_deployment.settings.pg_table)
    yield make_conninfo(pg_dsn, user=role, password="s3cret-app")
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("mode", ["pgvector-exact", "pgvector-hnsw"])
def test_the_read_only_role_answers_what_the_owner_answers(app_deployment, reader_dsn, mode):
    owner = mode_settings(app_deployment.settings, mode)
    reader = replace(owner, pg_dsn=reader_dsn)
    with (
        ServingCollection(owner, SeededEmbedder()) as mine,
        ServingCollection(reader, SeededEmbedder()) as theirs,
    ):
        for kind, kwargs in CALLS:
            expected, got = call_app(mine, kind, kwargs), call_app(theirs, kind, kwargs)
            if kind == "count":
                assert got == expected > 0
            else:
                same_answer(expected, got, kind, Tally(), f"{kind} {kwargs}")
    with psycopg.connect(reader_dsn) as conn, pytest.raises(errors.ReadOnlySqlTransaction):
        conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(owner.pg_table)))


@pytest.mark.parametrize("mode", ["pgvector-exact", "chroma"])
@pytest.mark.parametrize("name", WRITE_CALLS)
def test_write_calls_are_refused_by_name_and_write_nothing(app_deployment, mode, name):
    settings = mode_settings(app_deployment.settings, mode)
    with ServingCollection(settings, SeededEmbedder()) as collection:
        before = collection.get(include=["metadatas", "documents"])
        with pytest.raises(ReadOnlyCollectionError, match=rf"^{name}\(\) is refused"):
            getattr(collection, name)(ids=[before["ids"][0]], documents=["overwritten"])
        assert collection.get(include=["metadatas", "documents"]) == before
        with pytest.raises(AttributeError, match="peek"):
            collection.peek()


@pytest.fixture
def empty_stores(tmp_path, app_deployment):
    """A Chroma collection and a pgvector table with the model fixed and no rows."""
    settings = replace(app_deployment.settings, data_dir=tmp_path, drops_dir=tmp_path / "drops",
                       pg_table=f"empty_{uuid.uuid4().hex[:8]}")  # fmt: skip
    for name in ("chroma", "pgvector"):
        store = open_backend(name, settings)
        store.ensure_schema(SeededEmbedder.model_id, SeededEmbedder().dim)
        store.close()
    yield settings
    store = open_backend("pgvector", settings)
    store.reset()
    store.close()


EMPTY_CALLS = [
    ("count", {}),
    ("get", {}),
    ("get", {"include": ["embeddings", "uris"], "limit": 3}),
    ("get", {"where": {"year": {"$ne": 1}}, "where_document": {"$contains": "x"}}),
    ("query", {"query_texts": ["ALS", "SOD1"], "n_results": 5}),
    ("query", {"query_texts": ["ALS"], "include": ["embeddings", "distances", "uris"]}),
]  # fmt: skip


def test_an_empty_store_answers_as_an_empty_chroma_collection(empty_stores):
    promote_directly(empty_stores)
    lever = replace(empty_stores, serving_override="chroma")
    with (
        ServingCollection(empty_stores, SeededEmbedder()) as on_pg,
        ServingCollection(lever, SeededEmbedder()) as on_chroma,
    ):
        for kind, kwargs in EMPTY_CALLS:
            expected, got = call_app(on_chroma, kind, kwargs), call_app(on_pg, kind, kwargs)
            assert on_pg.target.backend == "pgvector" and on_chroma.target.backend == "chroma"
            if kind == "count":
                assert got == expected == 0
            else:
                same_answer(expected, got, kind, Tally(), f"{kind} {kwargs}")


def test_a_table_it_cannot_answer_from_is_refused_with_the_reason(empty_stores):
    promote_directly(empty_stores)
    missing = replace(empty_stores, pg_table="never_written")
    with open_collection(missing, SeededEmbedder()) as collection:
        with pytest.raises(BackendUnavailableError, match="never_written.*does not exist"):
            collection.count()
    store = open_backend("pgvector", empty_stores)
    with store.conn.transaction():  # a table from before the insertion order column
        store.conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN seq").format(store.names.ident()))
    store.close()
    with open_collection(empty_stores, SeededEmbedder()) as collection:
        with pytest.raises(BackendUnavailableError, match="no insertion order column"):
            collection.get()


def test_a_role_that_may_not_keep_answers_is_answered_by_sql(app_deployment, reader_dsn, pg_dsn):
    """A role granted before the term cache existed reads it but cannot keep what it computes:
    each miss is computed once and answered by SQL, never an error, never another answer."""
    from benchmarks.app import search_path as app

    cache = app_deployment.settings.term_cache
    owner = replace(app_deployment.settings, term_cache=replace(cache, enabled=False))
    role = psycopg.conninfo.conninfo_to_dict(reader_dsn)["user"]
    terms = sql.Identifier(owner.pg_table + "_terms")
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("REVOKE INSERT, UPDATE, DELETE ON {} FROM {}").format(
            terms, sql.Identifier(role)))  # fmt: skip
    asked = [("unseen motor neuron text", ["never-kept-name"], ["never-kept-code", "SPG302"])]
    with (ServingCollection(owner, SeededEmbedder()) as computed,
          ServingCollection(replace(owner, pg_dsn=reader_dsn, term_cache=cache),
                            SeededEmbedder()) as reader):  # fmt: skip
        for text, names, codes in asked * 2:
            assert app.answer(reader, text, names, codes) == app.answer(computed, text, names,
                                                                        codes)  # fmt: skip
        assert reader.answered.get("sql", 0) > 6 and "kept after computing" not in reader.answered
