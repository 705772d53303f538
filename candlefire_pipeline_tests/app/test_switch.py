"""The serving collection follows the switch as the reader does, through the operator's commands
on a real deployment: promote, rollback (the next call reads the other store), a generation
promoted (its own table and model), the switch file broken, the lever, a store that cannot be
opened; one call always reads one store, even when the switch moves during it. An app sharing
no disk with the pipeline (a Space) follows the same commands through the copy of the switch
published in Postgres."""

from __future__ import annotations

import logging
from dataclasses import replace

import psycopg
import pytest

from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.app.stores import open_store
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import resolve_dsn
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.parity import open_named_stores, run_report
from candlefire_pipeline.operations.serving.commands import Order, promote, rollback
from candlefire_pipeline.operations.serving.follow import ServingRefusedError
from candlefire_pipeline.operations.serving.published import publish_switch
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.settings import ParityThresholds, Settings
from candlefire_pipeline_tests.app.corpus import promote_directly
from candlefire_pipeline_tests.generations.deployment import build, deploy, drop_tables
from candlefire_pipeline_tests.latency import ignore_machine_latency

QUESTION = dict(query_texts=["SPG302 restores synapses in ALS"], n_results=8,
                include=["metadatas", "distances"])  # fmt: skip
CHROMA, PGVECTOR = Target("chroma"), Target("pgvector")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, pg_dsn):
    """The demo drops in every store (hashing-v1, 64-dim) and a parity report passing every
    gate; the switch is reset before each test."""
    monkeypatch = pytest.MonkeyPatch()
    ignore_machine_latency(monkeypatch)  # a property of this shared machine, not of the index
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")  # the pair the switch flips
    settings = deploy(monkeypatch, tmp_path_factory.mktemp("app-switch"), pg_dsn)
    embedder = embedder_for(settings, "query")
    with open_named_stores(settings) as stores:
        write_report(run_report(settings, embedder, stores), settings.reports_dir)
    yield settings
    drop_tables(settings)
    monkeypatch.undo()


@pytest.fixture
def settings(deployment):
    for path in (deployment.serving_file, deployment.serving_pending_file):
        path.unlink(missing_ok=True)
    return deployment


class Opened:
    """An opener that records what it opened (and can be told to fail, or to act mid-call)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.fail: set[str] = set()
        self.during_query = None

    def __call__(self, target, view, embedder):
        self.log.append(str(target))
        if target.backend in self.fail:
            raise BackendUnavailableError(f"{target.backend} is down (test)")
        store = open_store(target, view, embedder)
        if self.during_query is not None:
            real, hook = store.query, self.during_query

            def query(call, vectors):
                hook()
                return real(call, vectors)

            store.query = query
        return store


def ids(answer: dict) -> list[str]:
    return answer["ids"][0]


def alone(settings, backend: str) -> dict:
    """The question answered by one store, forced through the lever."""
    with ServingCollection(replace(settings, serving_override=backend)) as collection:
        answer = collection.query(**QUESTION)
        assert collection.target.backend == backend
        return answer


def test_the_collection_follows_promote_and_rollback_call_by_call(settings):
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        on_chroma = collection.query(**QUESTION)
        assert collection.target == CHROMA and ids(on_chroma)
        promoted = promote(settings, Order("promote", "app test", "tester"))
        assert promoted.decision.outcome == "changed"
        on_pg = collection.query(**QUESTION)
        assert collection.target == PGVECTOR
        assert on_chroma == alone(settings, "chroma") and on_pg == alone(settings, "pgvector")
        count = collection.count()
        rollback(settings, Order("rollback", "app test rollback", "tester"))
        assert collection.target == PGVECTOR  # not re-read until the next call
        assert collection.count() == count and collection.target == CHROMA
        rollback(settings, Order("rollback", "pinned again: same target, new file", "tester"))
        assert ids(collection.query(**QUESTION)) == ids(on_chroma)
    assert opened.log == ["chroma/default", "pgvector/default", "chroma/default"]


def test_one_call_reads_one_store_even_when_the_switch_moves_during_it(settings):
    promote(settings, Order("promote", "app test", "tester"))
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        expected = collection.query(**QUESTION)
        opened.during_query = lambda: rollback(
            settings, Order("rollback", "mid-call rollback", "tester")
        )
        collection.close()  # reopen through the hook
        answer = collection.query(**QUESTION)
        assert collection.target == PGVECTOR and answer == expected  # all of it from pgvector
        opened.during_query = None
        assert collection.get(limit=3, include=[])["ids"] and collection.target == CHROMA


def test_a_broken_switch_serves_chroma_and_says_so(settings, caplog):
    promote(settings, Order("promote", "app test", "tester"))
    settings.serving_file.write_text('{"backend": "pgvector", "state": "nonsense"')
    with ServingCollection(settings) as collection, caplog.at_level(logging.ERROR):
        assert collection.count() > 0 and collection.target == CHROMA
        assert "not valid JSON" in caplog.text
        promote_directly(settings)  # a valid file again (an operator's fix): the next call follows
        collection.count()
        assert collection.target == PGVECTOR


def test_the_emergency_lever_forces_chroma_and_refuses_pgvector_without_a_passing_report(
    settings,
):
    promote(settings, Order("promote", "app test", "tester"))
    with ServingCollection(replace(settings, serving_override="chroma")) as collection:
        collection.count()
        assert collection.target == CHROMA
    rollback(settings, Order("rollback", "pinned", "tester"))
    forced = replace(settings, serving_override="pgvector")
    with ServingCollection(forced) as collection:
        collection.count()
        assert collection.target == PGVECTOR
    strict = replace(forced, parity=ParityThresholds(min_corpus_chunks=1_000_000))
    with ServingCollection(strict) as collection:
        with pytest.raises(ServingRefusedError, match="failed gates: .*corpus_size"):
            collection.query(**QUESTION)


def test_a_store_that_cannot_be_opened_keeps_the_old_one_and_is_tried_again(settings):
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        collection.count()
        promote(settings, Order("promote", "app test", "tester"))
        opened.fail.add("pgvector")
        with pytest.raises(BackendUnavailableError, match="pgvector is down"):
            collection.count()
        assert collection.target == CHROMA  # nothing half-switched
        opened.fail.clear()
        collection.count()
        assert collection.target == PGVECTOR
    assert opened.log == ["chroma/default", "pgvector/default", "pgvector/default"]


def on_a_space(settings: Settings, poll_ms: int = 0) -> Settings:
    """The app as a Space runs it: the switch read from its copy in Postgres, not the file."""
    client = replace(settings.app_client, switch_source="postgres", switch_poll_ms=poll_ms)
    return replace(settings, app_client=client)


@pytest.fixture
def unpublished(settings):
    """The deployment with no published switch either (the file is gone: `settings`)."""
    with psycopg.connect(resolve_dsn(settings), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('serving_switch')").fetchone()[0]:
            conn.execute("DELETE FROM serving_switch WHERE pg_table = %s", [settings.pg_table])
    return settings


def test_an_app_without_the_switch_file_follows_the_switch_published_in_postgres(unpublished):
    settings = unpublished
    with ServingCollection(on_a_space(settings)) as app:
        assert app.count() > 0 and app.target == CHROMA  # never published: never promoted
        promote(settings, Order("promote", "space test", "tester"))
        on_pg = app.query(**QUESTION)
        assert app.target == PGVECTOR and on_pg == alone(settings, "pgvector")
        rollback(settings, Order("rollback", "space rollback", "tester"))
        assert app.query(**QUESTION) == alone(settings, "chroma") and app.target == CHROMA
        promote_directly(settings)  # the file alone, not published: the app never reads it
        app.count()
        assert app.target == CHROMA


def test_the_published_switch_is_read_once_per_poll_and_a_late_older_copy_never_wins(
    unpublished,
):
    settings = unpublished
    promote(settings, Order("promote", "space test", "tester"))
    newer = settings.serving_file.read_text()
    with ServingCollection(on_a_space(settings, poll_ms=3_600_000)) as app:
        app.count()
        rollback(settings, Order("rollback", "within the poll", "tester"))
        app.count()
        assert app.target == PGVECTOR  # not read again before the poll is due
    with ServingCollection(on_a_space(settings)) as app:
        app.count()
        assert app.target == CHROMA
    pinned_at = settings.serving_file.read_text()
    published = _published(settings)
    publish_switch(settings, resolve_dsn(settings))  # the same copy again: nothing written
    assert _published(settings) == published
    settings.serving_file.write_text(newer)  # a slower process publishing the older change
    publish_switch(settings, resolve_dsn(settings))
    assert _published(settings) == published and published[0] == "chroma_pinned"
    settings.serving_file.write_text(pinned_at)


def _published(settings: Settings) -> tuple:
    """(state, published_at) of the deployment's published switch."""
    with psycopg.connect(resolve_dsn(settings), autocommit=True) as conn:
        return conn.execute(
            "SELECT switch->>'state', published_at FROM serving_switch WHERE pg_table = %s",
            [settings.pg_table],
        ).fetchone()


def test_the_published_switch_survives_a_lost_connection_and_fails_in_one_line_unread(
    unpublished, caplog
):
    settings = unpublished
    promote(settings, Order("promote", "space test", "tester"))
    with ServingCollection(on_a_space(settings)) as app, caplog.at_level(logging.WARNING):
        app.count()
        with psycopg.connect(resolve_dsn(settings), autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'candlefire-app-switch'"
            ).fetchone()
        assert ended == (1,)
        app.count()  # the poll fails on the dead connection: the last copy read serves
        assert app.target == PGVECTOR and "the last copy read stays" in caplog.text
        rollback(settings, Order("rollback", "after the outage", "tester"))
        app.count()  # the next poll connects again and follows
        assert app.target == CHROMA
    nowhere = replace(on_a_space(settings), pg_dsn="postgresql://nobody@127.0.0.1:9/none")
    with ServingCollection(nowhere) as app:
        with pytest.raises(BackendUnavailableError, match="serving switch published") as raised:
            app.count()
        assert "\n" not in str(raised.value)


def test_a_promoted_generation_is_read_with_its_own_table_and_model(settings, capsys):
    """Last in the module: the generation stays registered."""
    from candlefire_pipeline.operations.generations.lifecycle import create_generation

    promote(settings, Order("promote", "the default first", "tester"))
    generation = create_generation(settings, "dim48", "hashing-v1:48")
    build(settings, generation)
    assert candlefire(["generation", "compare", "dim48"]) == 0
    with ServingCollection(settings) as collection:
        default = collection.query(**{**QUESTION, "include": ["embeddings"]})
        assert default["embeddings"][0].shape[1] == 64
        args = ["promote", "--generation", "dim48", "--reason", "serve dim48", "--by", "oncall"]
        assert candlefire(args) == 0, capsys.readouterr()
        answer = collection.query(**{**QUESTION, "include": ["embeddings", "distances"]})
        assert collection.target == Target("pgvector", "dim48")
        with ServingCollection(on_a_space(settings)) as app:  # the generation's published record
            on_space = app.query(**{**QUESTION, "include": ["embeddings", "distances"]})
            assert ids(on_space) == ids(answer) and on_space["distances"] == answer["distances"]
            assert app.target == Target("pgvector", "dim48")
        assert answer["embeddings"][0].shape[1] == 48 and ids(answer)  # its own query vectors
        assert collection.count() == len(collection.get(include=[])["ids"])
        rollback(settings, Order("rollback", "drill", "oncall"))
        again = collection.query(**{**QUESTION, "include": ["embeddings"]})
        assert collection.target == PGVECTOR and ids(again) == ids(default)
        assert again["embeddings"][0].shape[1] == 64
